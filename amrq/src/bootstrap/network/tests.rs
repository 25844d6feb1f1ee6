//! Jobs formed over loopback TCP: entries exchanged, a rendezvous file, a wrong key
//! refused, an unreachable rendezvous named.

use super::*;
use crate::bootstrap::JobKey;

fn terms(size: usize, key: JobKey) -> Terms {
    Terms {
        id: "net-test".into(),
        key,
        size,
        digest: 7,
        bytes: 0,
        agreement: String::new(),
    }
}

fn free_port() -> String {
    let l = TcpListener::bind("127.0.0.1:0").expect("a port");
    l.local_addr().expect("its address").to_string()
}

#[test]
fn ranks_exchange_entries_and_gather_words() {
    let key = JobKey::random().expect("key");
    let at = free_port();
    let jobs: Vec<NetJob> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..3)
            .map(|r| {
                let (t, at) = (terms(3, key), at.clone());
                s.spawn(move || {
                    let blob = vec![r as u8; 10 + r];
                    NetJob::form(r, &format!("h{r}"), &at, &t, blob, Duration::from_secs(20))
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().unwrap().expect("formed"))
            .collect()
    });
    for j in &jobs {
        for (r, e) in j.entries().iter().enumerate() {
            assert_eq!(e.host, format!("h{r}"));
            assert_eq!(e.blob, vec![r as u8; 10 + r]);
            assert_eq!(e.address, "127.0.0.1");
        }
    }
    let words: Vec<Vec<u64>> = std::thread::scope(|s| {
        let hs: Vec<_> = jobs
            .iter()
            .map(|j| s.spawn(move || j.allgather(100 + j.rank() as u64).expect("allgather")))
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(words.iter().all(|w| w == &[100, 101, 102]), "{words:?}");
    let blobs: Vec<Vec<Vec<u8>>> = std::thread::scope(|s| {
        let hs: Vec<_> = jobs
            .iter()
            .map(|j| s.spawn(move || j.exchange(&vec![7; j.rank() * 3]).expect("exchange")))
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let want: Vec<Vec<u8>> = (0..3).map(|r| vec![7; r * 3]).collect();
    assert!(blobs.iter().all(|b| b == &want), "{blobs:?}");
}

#[test]
fn ranks_meet_through_a_rendezvous_file() {
    let key = JobKey::random().expect("key");
    let dir = std::env::temp_dir().join(format!("amrq-rdv-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let file = dir.join("job.addr");
    // An older job's file is not read as this job's.
    std::fs::write(&file, "another-job\n127.0.0.1:9\n").expect("stale file");
    let at = format!("{FILE_PREFIX}{}", file.display());
    let jobs: Vec<NetJob> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..3)
            .rev()
            .map(|r| {
                let (t, at) = (terms(3, key), at.clone());
                s.spawn(move || {
                    NetJob::form(r, "h", &at, &t, vec![r as u8], Duration::from_secs(20))
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().unwrap().expect("formed"))
            .collect()
    });
    for j in &jobs {
        let blobs: Vec<Vec<u8>> = j.entries().iter().map(|e| e.blob.clone()).collect();
        assert_eq!(blobs, [[0], [1], [2]]);
    }
    assert!(
        !file.exists(),
        "rank 0 removes the file once the job has formed"
    );
    let _ = std::fs::remove_dir(&dir);
}

#[test]
fn a_wrong_key_is_refused_and_the_job_goes_on() {
    let key = JobKey::random().expect("key");
    let at = free_port();
    std::thread::scope(|s| {
        let a = at.clone();
        let zero = s.spawn(move || {
            NetJob::form(
                0,
                "h0",
                &a,
                &terms(2, key),
                vec![0],
                Duration::from_secs(20),
            )
        });
        let wrong = JobKey::random().expect("key");
        let e = NetJob::form(
            1,
            "x",
            &at,
            &terms(2, wrong),
            vec![9],
            Duration::from_secs(20),
        )
        .expect_err("a wrong key is refused");
        assert!(e.to_string().contains("not job net-test's key"), "{e}");
        let one = NetJob::form(
            1,
            "h1",
            &at,
            &terms(2, key),
            vec![1],
            Duration::from_secs(20),
        )
        .expect("the right key is admitted after");
        let zero = zero.join().unwrap().expect("rank 0 formed the job");
        assert_eq!(zero.entries()[1].blob, vec![1]);
        assert_eq!(one.entries()[0].host, "h0");
    });
}

#[test]
fn an_unreachable_rendezvous_is_named_with_its_address() {
    let at = free_port(); // nobody listens there once the probe is dropped
    let key = JobKey::random().expect("key");
    let t = terms(2, key);
    let e = NetJob::form(1, "h1", &at, &t, vec![], Duration::from_millis(300))
        .expect_err("nobody listens");
    let msg = e.to_string();
    assert!(msg.contains(&at) && msg.contains("TCP"), "{msg}");
}
