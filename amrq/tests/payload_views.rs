//! What a handler is handed of a payload: a Medium one lent in place, a Long one (in the
//! segment, where peers may write) only copied out, as threads and as processes.

#[path = "common/marker.rs"]
mod marker;

use amrq::prelude::*;
use std::borrow::Cow;
use std::cell::RefCell;
use std::process::Command;

#[derive(Default)]
struct Seen {
    /// Per message: (shared?, lent in place by `payload()`?, bytes as first read).
    views: RefCell<Vec<(bool, bool, Vec<u8>)>>,
    /// For a Long message overwritten during its handler: the copy taken before, then
    /// what a copy taken after reads.
    overwritten: RefCell<Option<(Vec<u8>, Vec<u8>)>>,
}

struct S {
    seen: Seen,
    back: ReplyHandler,
}

fn look(s: &S, m: &Msg<'_>) {
    let p = m.payload();
    let lent = matches!(p, Cow::Borrowed(_));
    let shared = m.payload_in_place().is_shared();
    assert_eq!(m.payload_in_place().held().is_none(), shared);
    s.seen
        .views
        .borrow_mut()
        .push((shared, lent, p.into_owned()));
}

fn job(setup: Setup) -> amrq::Result<()> {
    let mut t = HandlerTable::new();
    let back = t.reply("back", |s: &S, m| {
        look(s, &m);
        Ok(())
    });
    let take = t.request("take", |s: &S, ctx, m| {
        look(s, &m);
        if m.arg(0)? == 1 {
            ctx.reply_long(s.back, &[], b"long reply", 0)?;
        }
        Ok(())
    });
    let overwrite = t.request("overwrite", |s: &S, ctx, m| {
        let before = m.payload().into_owned();
        // What a peer's put into these bytes would do while the handler runs.
        let (base, _) = ctx.segment();
        let at = m.payload_in_place().as_ptr();
        // SAFETY: the payload's bytes, inside this rank's segment; no reference to
        // them is alive (the copy above is ours).
        unsafe { std::ptr::write_bytes(at.cast_mut(), 0xee, m.payload_len()) };
        assert!(at >= base.as_ptr().cast_const());
        let mut after = vec![0u8; m.payload_len()];
        m.payload_in_place().copy_to(&mut after);
        *s.seen.overwritten.borrow_mut() = Some((before, after));
        Ok(())
    });
    let am = setup.start(
        t,
        S {
            seen: Seen::default(),
            back,
        },
    )?;
    if am.rank() == 0 {
        am.request_medium(1, take, &[0], b"medium")?;
        am.request_long(1, take, &[1], b"long request", 4096)?;
        am.request_long(1, overwrite, &[], &[7u8; 300], 8192)?;
        am.wait_until(|s| !s.seen.views.borrow().is_empty())?;
        let views = am.state().seen.views.borrow();
        assert_eq!(*views, [(true, false, b"long reply".to_vec())]);
    }
    am.barrier()?;
    if am.rank() == 1 {
        let views = am.state().seen.views.borrow();
        assert_eq!(
            *views,
            [
                (false, true, b"medium".to_vec()),
                (true, false, b"long request".to_vec())
            ],
            "a Medium payload lent in place, a Long one copied out"
        );
        let (before, after) = am.state().seen.overwritten.borrow().clone().expect("ran");
        assert_eq!(before, [7u8; 300], "the copy stays as it was read");
        assert_eq!(after, [0xee; 300], "a later copy sees the write");
    }
    if std::env::var("AMRQ_TEST_PAYLOAD_VIEWS").is_ok() {
        assert!(
            marker::mark_ran(am.rank()),
            "cannot leave word that this rank ran"
        );
    }
    Ok(())
}

/// The processes' part: runs [`job`] as a rank of the job that started it.
#[test]
fn payload_views_rank() {
    if std::env::var("AMRQ_TEST_PAYLOAD_VIEWS").is_err() {
        return;
    }
    Config::new().run(job)
}

#[test]
fn a_long_payload_is_copied_out_and_a_medium_one_lent_as_threads() {
    amrq::Config::new().threads(2, job).unwrap();
}

#[test]
fn a_long_payload_is_copied_out_and_a_medium_one_lent_as_processes() {
    let token = marker::token();
    let exe = std::env::current_exe().expect("test binary");
    let out = Command::new(env!("CARGO_BIN_EXE_amrun"))
        .args(["-n", "2", "--bind", "none", "--timeout", "120"])
        .arg(exe)
        .args(marker::child_args("payload_views_rank"))
        .env("AMRQ_TEST_PAYLOAD_VIEWS", "1")
        .env("AMRQ_TEST_TOKEN", &token)
        .output()
        .expect("amrun starts");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    marker::all_ran(&token, 2);
}

/// Plain-data payloads: a Medium one of `f64`s lent in place, a Long one copied out,
/// values wider than the payload's alignment copied, and a length that is not a whole
/// number of values the sender's fault.
#[test]
fn plain_data_payloads_are_lent_when_held_and_copied_otherwise() {
    type Seen = RefCell<Vec<(bool, Vec<u128>)>>;
    let out = Config::new().threads(1, |setup| -> amrq::Result<()> {
        let mut t = HandlerTable::new();
        let as_f64 = t.request("f64s", |s: &Seen, _ctx, m| {
            let v = m.payload_as::<f64>()?;
            let lent = matches!(v, Cow::Borrowed(_));
            s.borrow_mut()
                .push((lent, v.iter().map(|&x| x as u128).collect()));
            Ok(())
        });
        let as_u128 = t.request("u128s", |s: &Seen, _ctx, m| {
            let v = m.payload_as::<u128>()?;
            s.borrow_mut()
                .push((matches!(v, Cow::Borrowed(_)), v.into_owned()));
            Ok(())
        });
        let am = setup.start(t, RefCell::new(Vec::new()))?;
        let xs = [1.0f64, 2.0, 3.0];
        am.request_medium(0, as_f64, &[], bytemuck::cast_slice(&xs))?;
        am.request_long(0, as_f64, &[], bytemuck::cast_slice(&xs), 64)?;
        am.request_medium(0, as_u128, &[1], bytemuck::cast_slice(&[7u128, 8]))?;
        am.wait_until(|s| s.borrow().len() == 3)?;
        let seen = am.state().borrow().clone();
        assert_eq!(seen[0], (true, vec![1, 2, 3]), "a Medium payload is lent");
        assert_eq!(seen[1], (false, vec![1, 2, 3]), "a Long payload is copied");
        assert_eq!(seen[2].1, vec![7, 8]);
        am.request_medium(0, as_u128, &[], &[0u8; 24])?;
        let Err(AmError::RequestFailed(f)) = am.wait_until(|_| false) else {
            panic!("24 bytes are not whole u128s")
        };
        assert_eq!(
            f.reason,
            amrq::conduit::FaultKind::BadPayload { len: 24, size: 16 }
        );
        Ok(())
    });
    assert!(out.is_ok(), "{}", out.unwrap_err().chain());
}
