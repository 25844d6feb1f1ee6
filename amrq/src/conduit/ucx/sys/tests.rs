//! The hand-written bindings against the installed C headers: `layout.c`, built with
//! the `cc` crate's compiler, prints every size, offset and constant they rely on.

use super::*;
use std::collections::BTreeMap;
use std::mem::{offset_of, size_of};

/// What `layout.c` printed, by "kind name", or `None` if the headers are not installed.
fn from_headers() -> Option<BTreeMap<String, i64>> {
    if !std::path::Path::new("/usr/include/ucp/api/ucp.h").exists() {
        assert!(
            std::env::var_os("AMRQ_REQUIRE_UCX").is_none(),
            "AMRQ_REQUIRE_UCX is set and the UCX headers are missing (apt-get install libucx-dev)"
        );
        eprintln!("skipped: the UCX headers are not installed (apt-get install libucx-dev)");
        return None;
    }
    let dir = std::env::temp_dir().join(format!("amrq-ucx-layout-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let target = format!("{}-unknown-linux-gnu", std::env::consts::ARCH);
    let compiler = cc::Build::new()
        .cargo_metadata(false)
        .opt_level(0)
        .target(&target)
        .host(&target)
        .out_dir(&dir)
        .try_get_compiler()
        .expect("a C compiler");
    let exe = dir.join("layout");
    let src = concat!(env!("CARGO_MANIFEST_DIR"), "/src/conduit/ucx/sys/layout.c");
    let built = compiler
        .to_command()
        .args([src, "-o"])
        .arg(&exe)
        .status()
        .expect("runs the C compiler");
    assert!(built.success(), "layout.c did not build");
    let out = std::process::Command::new(&exe)
        .output()
        .expect("runs layout");
    let _ = std::fs::remove_dir_all(&dir);
    let text = String::from_utf8(out.stdout).expect("text");
    Some(
        text.lines()
            .map(|l| {
                let (key, v) = l.rsplit_once(' ').expect("name value");
                (key.to_string(), v.parse().expect("a number"))
            })
            .collect(),
    )
}

macro_rules! expect {
    ($m:ident; sizes $($t:ident),*; offsets $($s:ident . $f:ident),*; values $($c:ident),*) => {{
        $($m.push((concat!("sizeof ", stringify!($t)).to_string(), size_of::<$t>() as i64));)*
        $($m.push((concat!("offsetof ", stringify!($s), ".", stringify!($f)).to_string(), offset_of!($s, $f) as i64));)*
        $($m.push((concat!("value ", stringify!($c)).to_string(), $c as i64));)*
    }};
}

#[test]
fn bindings_match_the_installed_headers() {
    let Some(c) = from_headers() else { return };
    let mut rust: Vec<(String, i64)> = Vec::new();
    let renamed = [
        ("sizeof ucp_err_handler_t", size_of::<ucp_err_handler_t>()),
        ("sizeof ucs_sock_addr_t", size_of::<ucs_sock_addr_t>()),
        ("sizeof ucs_cpu_set_t", size_of::<ucs_cpu_set_t>()),
        ("value ucp_dt_make_contig(1)", DATATYPE_BYTES as usize),
        ("value ucp_dt_make_contig(8)", DATATYPE_U64 as usize),
        ("value UCP_API_MAJOR", API_MAJOR as usize),
        ("value UCP_API_MINOR", API_MINOR as usize),
    ];
    rust.extend(renamed.iter().map(|(k, v)| (k.to_string(), *v as i64)));
    rust.push(("value UCS_ERR_LAST".into(), UCS_ERR_LAST as i64));
    expect!(rust;
        sizes ucs_status_t, ucp_params_t, ucp_worker_params_t, ucp_ep_params_t,
            ucp_mem_map_params_t, ucp_am_recv_param_t, ucp_am_handler_param_t,
            ucp_request_param_t;
        offsets ucp_params_t.features, ucp_params_t.request_size, ucp_params_t.request_init,
            ucp_params_t.request_cleanup, ucp_params_t.tag_sender_mask,
            ucp_params_t.mt_workers_shared, ucp_params_t.estimated_num_eps,
            ucp_params_t.estimated_num_ppn, ucp_params_t.name,
            ucp_worker_params_t.thread_mode, ucp_worker_params_t.cpu_mask,
            ucp_worker_params_t.events, ucp_worker_params_t.user_data,
            ucp_worker_params_t.event_fd, ucp_worker_params_t.flags,
            ucp_worker_params_t.name, ucp_worker_params_t.am_alignment,
            ucp_worker_params_t.client_id,
            ucp_ep_params_t.address, ucp_ep_params_t.err_mode, ucp_ep_params_t.err_handler,
            ucp_ep_params_t.user_data, ucp_ep_params_t.flags, ucp_ep_params_t.sockaddr,
            ucp_ep_params_t.conn_request, ucp_ep_params_t.name,
            ucp_ep_params_t.local_sockaddr,
            ucp_mem_map_params_t.address, ucp_mem_map_params_t.length,
            ucp_mem_map_params_t.flags, ucp_mem_map_params_t.prot,
            ucp_mem_map_params_t.memory_type,
            ucp_am_recv_param_t.recv_attr, ucp_am_recv_param_t.reply_ep,
            ucp_am_handler_param_t.id, ucp_am_handler_param_t.flags,
            ucp_am_handler_param_t.cb, ucp_am_handler_param_t.arg,
            ucp_request_param_t.flags, ucp_request_param_t.request, ucp_request_param_t.cb,
            ucp_request_param_t.datatype, ucp_request_param_t.user_data,
            ucp_request_param_t.reply_buffer, ucp_request_param_t.memory_type,
            ucp_request_param_t.recv_info, ucp_request_param_t.memh;
        values UCS_OK, UCS_INPROGRESS, UCS_ERR_NO_RESOURCE, UCS_ERR_BUSY,
            UCS_ERR_INVALID_PARAM, UCS_ERR_NOT_CONNECTED, UCS_ERR_CONNECTION_RESET,
            UCP_PARAM_FIELD_FEATURES, UCP_PARAM_FIELD_MT_WORKERS_SHARED, UCP_PARAM_FIELD_NAME,
            UCP_FEATURE_RMA, UCP_FEATURE_AMO64, UCP_FEATURE_WAKEUP, UCP_FEATURE_AM,
            UCP_WORKER_PARAM_FIELD_THREAD_MODE, UCS_THREAD_MODE_SINGLE, UCS_THREAD_MODE_SERIALIZED,
            UCS_THREAD_MODE_MULTI,
            UCP_EP_PARAM_FIELD_REMOTE_ADDRESS, UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE,
            UCP_EP_PARAM_FIELD_ERR_HANDLER, UCP_ERR_HANDLING_MODE_PEER, UCP_EP_CLOSE_FLAG_FORCE,
            UCP_MEM_MAP_PARAM_FIELD_ADDRESS, UCP_MEM_MAP_PARAM_FIELD_LENGTH,
            UCP_AM_HANDLER_PARAM_FIELD_ID, UCP_AM_HANDLER_PARAM_FIELD_FLAGS,
            UCP_AM_HANDLER_PARAM_FIELD_CB, UCP_AM_HANDLER_PARAM_FIELD_ARG,
            UCP_AM_FLAG_WHOLE_MSG, UCP_AM_SEND_FLAG_EAGER, UCP_AM_RECV_ATTR_FLAG_RNDV,
            UCP_OP_ATTR_FIELD_FLAGS, UCP_OP_ATTR_FIELD_REPLY_BUFFER, UCP_OP_ATTR_FIELD_DATATYPE,
            UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL, UCP_OP_ATTR_FIELD_CALLBACK, UCP_OP_ATTR_FIELD_USER_DATA,
            UCP_ATOMIC_OP_ADD, UCP_ATOMIC_OP_SWAP, UCP_ATOMIC_OP_CSWAP, UCP_ATOMIC_OP_AND,
            UCP_ATOMIC_OP_OR, UCP_ATOMIC_OP_XOR
    );
    let mut wrong = Vec::new();
    for (key, mine) in &rust {
        match c.get(key) {
            Some(theirs) if theirs == mine => {}
            Some(theirs) => wrong.push(format!("{key}: headers {theirs}, bindings {mine}")),
            None => wrong.push(format!("{key}: not printed by layout.c")),
        }
    }
    let checked: std::collections::BTreeSet<&String> = rust.iter().map(|(k, _)| k).collect();
    wrong.extend(
        c.keys()
            .filter(|k| !checked.contains(k))
            .map(|k| format!("{k}: printed by layout.c, not checked")),
    );
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_installed_library_loads_or_says_what_to_install() {
    match Ucp::get() {
        Ok(ucp) => {
            let (major, minor, _) = ucp.version();
            assert_eq!(major, API_MAJOR);
            assert!(minor >= API_MINOR);
            assert_eq!(ucp.status(UCS_OK), "Success");
        }
        Err(e @ Missing::NotInstalled(_)) => {
            assert!(std::env::var_os("AMRQ_REQUIRE_UCX").is_none(), "{e}");
            assert!(e.to_string().contains("apt-get install libucx0"), "{e}");
            eprintln!("skipped: {e}");
        }
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn status_pointers_are_read_as_ucx_does() {
    assert_eq!(StatusPtr::of(std::ptr::null_mut()), StatusPtr::Done);
    let err = UCS_ERR_NO_RESOURCE as isize as usize as *mut c_void;
    assert_eq!(StatusPtr::of(err), StatusPtr::Err(UCS_ERR_NO_RESOURCE));
    let req = 0x1000 as *mut c_void;
    assert_eq!(StatusPtr::of(req), StatusPtr::Request(req));
}
