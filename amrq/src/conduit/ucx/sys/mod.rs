//! The part of UCX's UCP API (1.13, `<ucp/api/ucp.h>`) this conduit uses, bound by hand
//! and loaded at run time: `libucp.so.0` is opened with `dlopen` when the first UCX
//! endpoint is made, so the default build has the conduit and needs no UCX to build,
//! and a machine without UCX gets [`Missing`] saying what to install.
//!
//! Every struct is `#[repr(C)]` with the header's fields in order; a unit test compiles
//! `layout.c` against the installed headers and compares sizes and offsets. The
//! parameter structs have a `field_mask`, so a newer UCX of the same major version
//! reads them as 1.13 wrote them; loading refuses another major version or an
//! older minor one, naming both (when it is first loaded).

#![allow(non_camel_case_types, missing_docs)]

use std::ffi::{c_char, c_int, c_uint, c_void, CStr};

/// The UCP API version these bindings were written against (`UCP_API_MAJOR/MINOR`).
pub const API_MAJOR: c_uint = 1;
/// See [`API_MAJOR`].
pub const API_MINOR: c_uint = 13;

/// `ucs_status_t`: a packed enum, one byte.
pub type ucs_status_t = i8;
pub const UCS_OK: ucs_status_t = 0;
pub const UCS_INPROGRESS: ucs_status_t = 1;
pub const UCS_ERR_NO_RESOURCE: ucs_status_t = -2;
pub const UCS_ERR_INVALID_PARAM: ucs_status_t = -5;
pub const UCS_ERR_BUSY: ucs_status_t = -15;
pub const UCS_ERR_NOT_CONNECTED: ucs_status_t = -24;
pub const UCS_ERR_CONNECTION_RESET: ucs_status_t = -25;
/// `UCS_ERR_LAST`: a status pointer at or above `(uintptr_t)UCS_ERR_LAST` is an error.
pub const UCS_ERR_LAST: isize = -100;

/// `ucs_status_ptr_t`: NULL (done), an error code, or a request.
pub type ucs_status_ptr_t = *mut c_void;

/// What a `ucs_status_ptr_t` is (`UCS_PTR_IS_ERR` / `UCS_PTR_IS_PTR`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusPtr {
    /// NULL: completed at once.
    Done,
    /// An error.
    Err(ucs_status_t),
    /// A request to test and free.
    Request(*mut c_void),
}

impl StatusPtr {
    /// Reads a `ucs_status_ptr_t`.
    pub fn of(p: ucs_status_ptr_t) -> Self {
        let v = p as usize;
        if v == 0 {
            StatusPtr::Done
        } else if v >= UCS_ERR_LAST as usize {
            StatusPtr::Err(v as isize as ucs_status_t)
        } else {
            StatusPtr::Request(p)
        }
    }
}

pub type ucp_context_h = *mut c_void;
pub type ucp_worker_h = *mut c_void;
pub type ucp_ep_h = *mut c_void;
pub type ucp_mem_h = *mut c_void;
pub type ucp_rkey_h = *mut c_void;
pub type ucp_config_t = c_void;
pub type ucp_address_t = c_void;
pub type ucp_datatype_t = u64;

pub const UCP_PARAM_FIELD_FEATURES: u64 = 1 << 0;
#[cfg(test)] // checked against ucp.h with its neighbours; amrq does not use it
pub const UCP_PARAM_FIELD_MT_WORKERS_SHARED: u64 = 1 << 5;
pub const UCP_PARAM_FIELD_NAME: u64 = 1 << 8;
pub const UCP_FEATURE_RMA: u64 = 1 << 1;
pub const UCP_FEATURE_AMO64: u64 = 1 << 3;
pub const UCP_FEATURE_WAKEUP: u64 = 1 << 4;
pub const UCP_FEATURE_AM: u64 = 1 << 6;

pub const UCP_WORKER_PARAM_FIELD_THREAD_MODE: u64 = 1 << 0;
#[cfg(test)] // checked against ucp.h with its neighbours; amrq does not use it
pub const UCS_THREAD_MODE_SINGLE: c_int = 0;
pub const UCS_THREAD_MODE_SERIALIZED: c_int = 1;
pub const UCS_THREAD_MODE_MULTI: c_int = 2;

pub const UCP_EP_PARAM_FIELD_REMOTE_ADDRESS: u64 = 1 << 0;
pub const UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE: u64 = 1 << 1;
pub const UCP_EP_PARAM_FIELD_ERR_HANDLER: u64 = 1 << 2;
pub const UCP_ERR_HANDLING_MODE_PEER: c_int = 1;
pub const UCP_EP_CLOSE_FLAG_FORCE: u32 = 1 << 0;

pub const UCP_MEM_MAP_PARAM_FIELD_ADDRESS: u64 = 1 << 0;
pub const UCP_MEM_MAP_PARAM_FIELD_LENGTH: u64 = 1 << 1;

pub const UCP_AM_HANDLER_PARAM_FIELD_ID: u64 = 1 << 0;
pub const UCP_AM_HANDLER_PARAM_FIELD_FLAGS: u64 = 1 << 1;
pub const UCP_AM_HANDLER_PARAM_FIELD_CB: u64 = 1 << 2;
pub const UCP_AM_HANDLER_PARAM_FIELD_ARG: u64 = 1 << 3;
pub const UCP_AM_FLAG_WHOLE_MSG: u32 = 1 << 0;
pub const UCP_AM_SEND_FLAG_EAGER: u32 = 1 << 1;
pub const UCP_AM_RECV_ATTR_FLAG_RNDV: u64 = 1 << 17;

pub const UCP_OP_ATTR_FIELD_FLAGS: u32 = 1 << 4;
pub const UCP_OP_ATTR_FIELD_REPLY_BUFFER: u32 = 1 << 5;
pub const UCP_OP_ATTR_FIELD_DATATYPE: u32 = 1 << 3;
pub const UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL: u32 = 1 << 18;
pub const UCP_OP_ATTR_FIELD_CALLBACK: u32 = 1 << 1;
pub const UCP_OP_ATTR_FIELD_USER_DATA: u32 = 1 << 2;

/// `ucp_send_nbx_callback_t`: a send completed (or failed).
pub type ucp_send_nbx_callback_t =
    unsafe extern "C" fn(request: *mut c_void, status: ucs_status_t, user_data: *mut c_void);

/// `ucp_dt_make_contig(1)`: bytes (the element size shifted by 3, class 0: contiguous).
#[cfg(test)] // checked against ucp.h with its neighbours; amrq does not use it
pub const DATATYPE_BYTES: ucp_datatype_t = 1 << 3;
/// `ucp_dt_make_contig(8)`: the 64-bit words of an atomic.
pub const DATATYPE_U64: ucp_datatype_t = 8 << 3;

pub const UCP_ATOMIC_OP_ADD: c_int = 0;
pub const UCP_ATOMIC_OP_SWAP: c_int = 1;
pub const UCP_ATOMIC_OP_CSWAP: c_int = 2;
pub const UCP_ATOMIC_OP_AND: c_int = 3;
pub const UCP_ATOMIC_OP_OR: c_int = 4;
pub const UCP_ATOMIC_OP_XOR: c_int = 5;

#[repr(C)]
pub struct ucp_params_t {
    pub field_mask: u64,
    pub features: u64,
    pub request_size: usize,
    pub request_init: Option<unsafe extern "C" fn(*mut c_void)>,
    pub request_cleanup: Option<unsafe extern "C" fn(*mut c_void)>,
    pub tag_sender_mask: u64,
    pub mt_workers_shared: c_int,
    pub estimated_num_eps: usize,
    pub estimated_num_ppn: usize,
    pub name: *const c_char,
}

/// `ucs_cpu_set_t`: 1024 bits.
#[repr(C)]
pub struct ucs_cpu_set_t {
    pub bits: [u64; 16],
}

#[repr(C)]
pub struct ucp_worker_params_t {
    pub field_mask: u64,
    pub thread_mode: c_int,
    pub cpu_mask: ucs_cpu_set_t,
    pub events: c_uint,
    pub user_data: *mut c_void,
    pub event_fd: c_int,
    pub flags: u64,
    pub name: *const c_char,
    pub am_alignment: usize,
    pub client_id: u64,
}

#[repr(C)]
pub struct ucp_err_handler_t {
    pub cb: Option<unsafe extern "C" fn(*mut c_void, ucp_ep_h, ucs_status_t)>,
    pub arg: *mut c_void,
}

#[repr(C)]
pub struct ucs_sock_addr_t {
    pub addr: *const c_void,
    pub addrlen: u32,
}

#[repr(C)]
pub struct ucp_ep_params_t {
    pub field_mask: u64,
    pub address: *const ucp_address_t,
    pub err_mode: c_int,
    pub err_handler: ucp_err_handler_t,
    pub user_data: *mut c_void,
    pub flags: c_uint,
    pub sockaddr: ucs_sock_addr_t,
    pub conn_request: *mut c_void,
    pub name: *const c_char,
    pub local_sockaddr: ucs_sock_addr_t,
}

#[repr(C)]
pub struct ucp_mem_map_params_t {
    pub field_mask: u64,
    pub address: *mut c_void,
    pub length: usize,
    pub flags: c_uint,
    pub prot: c_uint,
    pub memory_type: c_int,
}

#[repr(C)]
pub struct ucp_am_recv_param_t {
    pub recv_attr: u64,
    pub reply_ep: ucp_ep_h,
}

/// `ucp_am_recv_callback_t`.
pub type ucp_am_recv_callback_t = unsafe extern "C" fn(
    arg: *mut c_void,
    header: *const c_void,
    header_length: usize,
    data: *mut c_void,
    length: usize,
    param: *const ucp_am_recv_param_t,
) -> ucs_status_t;

#[repr(C)]
pub struct ucp_am_handler_param_t {
    pub field_mask: u64,
    pub id: c_uint,
    pub flags: u32,
    pub cb: Option<ucp_am_recv_callback_t>,
    pub arg: *mut c_void,
}

#[repr(C)]
pub struct ucp_request_param_t {
    pub op_attr_mask: u32,
    pub flags: u32,
    pub request: *mut c_void,
    pub cb: *mut c_void,
    pub datatype: ucp_datatype_t,
    pub user_data: *mut c_void,
    pub reply_buffer: *mut c_void,
    pub memory_type: c_int,
    pub recv_info: *mut c_void,
    pub memh: ucp_mem_h,
}

impl ucp_request_param_t {
    /// No field set: UCX's defaults (contiguous bytes, no callback).
    pub fn empty() -> Self {
        // SAFETY: every field is an integer or a raw pointer, for which zero is valid.
        unsafe { std::mem::zeroed() }
    }
}

/// Declares the function table and its loader.
macro_rules! functions {
    ($($name:ident: fn($($arg:ty),*) $(-> $ret:ty)?;)*) => {
        /// The UCP functions, resolved from `libucp.so.0`.
        #[allow(non_snake_case)]
        pub struct Ucp {
            $(pub $name: unsafe extern "C" fn($($arg),*) $(-> $ret)?,)*
        }

        impl Ucp {
            fn resolve(lib: *mut c_void) -> Result<Self, Missing> {
                Ok(Self {
                    $($name: {
                        let name = concat!(stringify!($name), "\0");
                        // SAFETY: `lib` is a live dlopen handle and `name` is NUL-terminated.
                        let f = unsafe { libc::dlsym(lib, name.as_ptr().cast()) };
                        if f.is_null() {
                            return Err(Missing::Symbol(stringify!($name)));
                        }
                        // SAFETY: the symbol is the C function of this name, whose
                        // prototype in ucp.h 1.13 is the one declared here.
                        unsafe { std::mem::transmute::<*mut c_void, unsafe extern "C" fn($($arg),*) $(-> $ret)?>(f) }
                    },)*
                })
            }
        }
    };
}

functions! {
    ucp_get_version: fn(*mut c_uint, *mut c_uint, *mut c_uint);
    ucp_config_read: fn(*const c_char, *const c_char, *mut *mut ucp_config_t) -> ucs_status_t;
    ucp_config_modify: fn(*mut ucp_config_t, *const c_char, *const c_char) -> ucs_status_t;
    ucp_config_release: fn(*mut ucp_config_t);
    ucp_init_version: fn(c_uint, c_uint, *const ucp_params_t, *const ucp_config_t, *mut ucp_context_h) -> ucs_status_t;
    ucp_cleanup: fn(ucp_context_h);
    ucp_worker_create: fn(ucp_context_h, *const ucp_worker_params_t, *mut ucp_worker_h) -> ucs_status_t;
    ucp_worker_destroy: fn(ucp_worker_h);
    ucp_worker_get_address: fn(ucp_worker_h, *mut *mut ucp_address_t, *mut usize) -> ucs_status_t;
    ucp_worker_release_address: fn(ucp_worker_h, *mut ucp_address_t);
    ucp_worker_progress: fn(ucp_worker_h) -> c_uint;
    ucp_worker_get_efd: fn(ucp_worker_h, *mut c_int) -> ucs_status_t;
    ucp_worker_arm: fn(ucp_worker_h) -> ucs_status_t;
    ucp_worker_set_am_recv_handler: fn(ucp_worker_h, *const ucp_am_handler_param_t) -> ucs_status_t;
    ucp_worker_flush_nbx: fn(ucp_worker_h, *const ucp_request_param_t) -> ucs_status_ptr_t;
    ucp_ep_create: fn(ucp_worker_h, *const ucp_ep_params_t, *mut ucp_ep_h) -> ucs_status_t;
    ucp_ep_close_nbx: fn(ucp_ep_h, *const ucp_request_param_t) -> ucs_status_ptr_t;
    ucp_ep_print_info: fn(ucp_ep_h, *mut libc::FILE);
    ucp_am_send_nbx: fn(ucp_ep_h, c_uint, *const c_void, usize, *const c_void, usize, *const ucp_request_param_t) -> ucs_status_ptr_t;
    ucp_request_check_status: fn(*mut c_void) -> ucs_status_t;
    ucp_request_free: fn(*mut c_void);
    ucp_mem_map: fn(ucp_context_h, *const ucp_mem_map_params_t, *mut ucp_mem_h) -> ucs_status_t;
    ucp_mem_unmap: fn(ucp_context_h, ucp_mem_h) -> ucs_status_t;
    ucp_rkey_pack: fn(ucp_context_h, ucp_mem_h, *mut *mut c_void, *mut usize) -> ucs_status_t;
    ucp_rkey_buffer_release: fn(*mut c_void);
    ucp_ep_rkey_unpack: fn(ucp_ep_h, *const c_void, *mut ucp_rkey_h) -> ucs_status_t;
    ucp_rkey_destroy: fn(ucp_rkey_h);
    ucp_put_nbx: fn(ucp_ep_h, *const c_void, usize, u64, ucp_rkey_h, *const ucp_request_param_t) -> ucs_status_ptr_t;
    ucp_get_nbx: fn(ucp_ep_h, *mut c_void, usize, u64, ucp_rkey_h, *const ucp_request_param_t) -> ucs_status_ptr_t;
    ucp_atomic_op_nbx: fn(ucp_ep_h, c_int, *const c_void, usize, u64, ucp_rkey_h, *const ucp_request_param_t) -> ucs_status_ptr_t;
    ucs_status_string: fn(ucs_status_t) -> *const c_char;
}

/// Why UCX cannot be used here.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Missing {
    /// `libucp.so.0` is not installed.
    #[error("UCX is not installed ({0}): apt-get install libucx0 (Debian/Ubuntu), or put libucp.so.0 on LD_LIBRARY_PATH")]
    NotInstalled(String),
    /// The library lacks a function of the API.
    #[error("libucp.so.0 has no {0}: it is not UCX {API_MAJOR}.{API_MINOR} or newer")]
    Symbol(&'static str),
    /// Another major version, or an older minor one.
    #[error("libucp.so.0 is UCX {found}; amrq's UCX conduit was written for UCX {API_MAJOR}.{API_MINOR} (any 1.x from 1.13 works)")]
    Version {
        /// The installed version.
        found: String,
    },
}

impl Ucp {
    /// The installed UCP, loaded once per process (then shared).
    pub fn get() -> Result<&'static Ucp, Missing> {
        static UCP: std::sync::OnceLock<Result<Ucp, Missing>> = std::sync::OnceLock::new();
        UCP.get_or_init(Self::load).as_ref().map_err(Clone::clone)
    }

    fn load() -> Result<Ucp, Missing> {
        let name = c"libucp.so.0";
        // SAFETY: a NUL-terminated name; the handle is never closed (the functions
        // stay in use for the life of the process).
        let lib = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if lib.is_null() {
            // SAFETY: dlerror returns NULL or a NUL-terminated message.
            let why = unsafe { libc::dlerror() };
            let why = if why.is_null() {
                "dlopen failed".to_string()
            } else {
                // SAFETY: as above: non-null, NUL-terminated.
                unsafe { CStr::from_ptr(why) }
                    .to_string_lossy()
                    .into_owned()
            };
            return Err(Missing::NotInstalled(why));
        }
        let ucp = Self::resolve(lib)?;
        let (major, minor, release) = ucp.version();
        if major != API_MAJOR || minor < API_MINOR {
            return Err(Missing::Version {
                found: format!("{major}.{minor}.{release}"),
            });
        }
        Ok(ucp)
    }

    /// The installed library's version (`ucp_get_version`).
    pub fn version(&self) -> (c_uint, c_uint, c_uint) {
        let (mut a, mut b, mut c) = (0, 0, 0);
        // SAFETY: three valid out-pointers.
        unsafe { (self.ucp_get_version)(&mut a, &mut b, &mut c) };
        (a, b, c)
    }

    /// UCX's text for `status`.
    pub fn status(&self, status: ucs_status_t) -> String {
        // SAFETY: ucs_status_string returns a static NUL-terminated string for any code.
        let s = unsafe { (self.ucs_status_string)(status) };
        if s.is_null() {
            return format!("UCX status {status}");
        }
        // SAFETY: non-null, static, NUL-terminated.
        unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned()
    }
}

#[cfg(test)]
mod tests;
