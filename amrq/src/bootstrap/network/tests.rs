//! Jobs formed over loopback TCP: entries exchanged, a rendezvous file, a wrong key
//! refused, an unreachable rendezvous named.

use super::*;
use crate::bootstrap::JobKey;
use std::time::Instant;

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

/// Forms a job of `size` ranks as threads of this process, each publishing its rank.
fn form_threads(size: usize, key: JobKey, at: &str) -> Vec<NetJob> {
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..size)
            .map(|r| {
                let t = terms(size, key);
                s.spawn(move || {
                    let blob = (r as u32).to_le_bytes().to_vec();
                    NetJob::form(
                        r,
                        &format!("h{}", r % 3),
                        at,
                        &t,
                        blob,
                        Duration::from_secs(60),
                    )
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().unwrap().expect("formed"))
            .collect()
    })
}

#[test]
fn a_job_deeper_than_one_level_forms_over_the_tree_and_no_rank_holds_more_than_nine_edges() {
    let key = JobKey::random().expect("key");
    let at = free_port();
    let size = 80; // positions 9 … 79 hang under ranks other than rank 0
    let jobs = form_threads(size, key, &at);
    for j in &jobs {
        let blobs: Vec<Vec<u8>> = j.entries().iter().map(|e| e.blob.clone()).collect();
        let want: Vec<Vec<u8>> = (0..size as u32).map(|r| r.to_le_bytes().to_vec()).collect();
        assert_eq!(blobs, want, "rank {}'s table", j.rank());
        let edges = j.edges.lock().unwrap();
        assert_eq!(edges.parent.is_none(), j.rank() == 0);
        assert!(edges.children.len() <= 8, "rank {}", j.rank());
    }
    let under_zero = jobs[0].edges.lock().unwrap().children.len();
    assert_eq!(
        under_zero, 8,
        "rank 0 keeps only its children's connections"
    );
    let kids: usize = jobs
        .iter()
        .map(|j| j.edges.lock().unwrap().children.len())
        .sum();
    assert_eq!(
        kids,
        size - 1,
        "every rank but rank 0 is someone's child, once"
    );
    for round in 0..2u64 {
        let words: Vec<Vec<u64>> = std::thread::scope(|s| {
            let hs: Vec<_> = jobs
                .iter()
                .map(|j| s.spawn(move || j.allgather(round * 1000 + j.rank() as u64)))
                .collect();
            hs.into_iter()
                .map(|h| h.join().unwrap().expect("allgather"))
                .collect()
        });
        let want: Vec<u64> = (0..size as u64).map(|r| round * 1000 + r).collect();
        assert!(words.iter().all(|w| w == &want), "round {round}");
    }
}

#[test]
fn a_parent_takes_only_the_children_that_prove_the_key_at_their_positions() {
    let t = terms(20, JobKey::random().expect("key")); // position 1's children: 9 … 16
    let listener = TcpListener::bind("127.0.0.1:0").expect("a port");
    let at = listener.local_addr().expect("its address").to_string();
    let soon = || Instant::now() + Duration::from_millis(500);
    let place = |k: usize| tree::Placement {
        k,
        parent: 1,
        at: at.clone(),
    };
    // Position 1's own parent edge, held open by rank 0's end.
    let root = TcpListener::bind("127.0.0.1:0").expect("a port");
    let up = TcpStream::connect(root.local_addr().expect("its address")).expect("connect");
    let _held = root.accept().expect("accept");
    let up = tree::Link::new(up, 0, &t, (&[0; 16], &[1; 16]), true);
    std::thread::scope(|s| {
        let parent = s.spawn(|| {
            let deadline = Instant::now() + Duration::from_secs(20);
            tree::accept_children(&listener, &up, 1, &t, 1, deadline)
        });
        // A process without the key is refused by the child's own check, and the
        // parent takes nothing from it.
        let stranger = terms(20, JobKey::random().expect("key"));
        let e = tree::connect_parent(&place(9), &stranger, 9, soon()).expect_err("no key");
        assert!(e.to_string().contains("did not prove"), "{e}");
        // A rank with the key at a position that is not this parent's is not answered.
        assert!(tree::connect_parent(&place(3), &t, 3, soon()).is_err());
        let mut kids: Vec<tree::Link> = (9..17)
            .map(|k| tree::connect_parent(&place(k), &t, k + 2, soon()).expect("a child"))
            .collect();
        let mut links = parent.join().unwrap().expect("all eight children");
        links.sort_by_key(|l| l.peer);
        let peers: Vec<usize> = links.iter().map(|l| l.peer).collect();
        assert_eq!(peers, (11..19).collect::<Vec<_>>());
        // Messages go both ways under the edge's MAC.
        kids[0].send(b"up").expect("send");
        assert_eq!(links[0].read().expect("read"), b"up");
        links[7].send(b"down").expect("send");
        assert_eq!(kids[7].read().expect("read"), b"down");
    });
}

#[test]
fn a_parent_waiting_for_its_children_stops_when_its_own_parent_hangs_up() {
    let t = terms(20, JobKey::random().expect("key"));
    let listener = TcpListener::bind("127.0.0.1:0").expect("a port");
    let root = TcpListener::bind("127.0.0.1:0").expect("a port");
    let up = TcpStream::connect(root.local_addr().expect("its address")).expect("connect");
    drop(root.accept().expect("accept")); // rank 0's end closes: the job cannot form
    let up = tree::Link::new(up, 0, &t, (&[0; 16], &[1; 16]), true);
    let since = Instant::now();
    let deadline = since + Duration::from_secs(20);
    let e = tree::accept_children(&listener, &up, 1, &t, 1, deadline).expect_err("hung up");
    assert!(e.to_string().contains("lost its parent"), "{e}");
    assert!(
        since.elapsed() < Duration::from_secs(5),
        "not the attach timeout"
    );
}

#[test]
fn a_child_whose_parent_has_gone_fails_at_once() {
    let t = terms(20, JobKey::random().expect("key"));
    let at = free_port(); // nobody listens there once the probe is dropped
    let place = tree::Placement {
        k: 9,
        parent: 1,
        at,
    };
    let since = Instant::now();
    let e = tree::connect_parent(&place, &t, 9, since + Duration::from_secs(20))
        .expect_err("nobody listens");
    assert!(e.to_string().contains("found no parent"), "{e}");
    assert!(
        since.elapsed() < Duration::from_secs(5),
        "not the attach timeout"
    );
}
