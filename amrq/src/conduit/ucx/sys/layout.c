/* Prints what amrq's hand-written UCP bindings (sys/mod.rs) must agree with: the size
 * and field offsets of each struct, and the value of each constant, one per line as
 * "name value". Built and run by the unit test in sys/tests.rs. */
#include <stddef.h>
#include <stdio.h>
#include <ucp/api/ucp.h>

#define SIZE(t) printf("sizeof %s %zu\n", #t, sizeof(t))
#define OFF(t, f) printf("offsetof %s.%s %zu\n", #t, #f, offsetof(t, f))
#define VAL(c) printf("value %s %lld\n", #c, (long long)(c))

int main(void)
{
    SIZE(ucs_status_t);
    SIZE(ucp_params_t);
    OFF(ucp_params_t, features); OFF(ucp_params_t, request_size);
    OFF(ucp_params_t, request_init); OFF(ucp_params_t, request_cleanup);
    OFF(ucp_params_t, tag_sender_mask); OFF(ucp_params_t, mt_workers_shared);
    OFF(ucp_params_t, estimated_num_eps); OFF(ucp_params_t, estimated_num_ppn);
    OFF(ucp_params_t, name);
    SIZE(ucs_cpu_set_t);
    SIZE(ucp_worker_params_t);
    OFF(ucp_worker_params_t, thread_mode); OFF(ucp_worker_params_t, cpu_mask);
    OFF(ucp_worker_params_t, events); OFF(ucp_worker_params_t, user_data);
    OFF(ucp_worker_params_t, event_fd); OFF(ucp_worker_params_t, flags);
    OFF(ucp_worker_params_t, name); OFF(ucp_worker_params_t, am_alignment);
    OFF(ucp_worker_params_t, client_id);
    SIZE(ucp_err_handler_t);
    SIZE(ucs_sock_addr_t);
    SIZE(ucp_ep_params_t);
    OFF(ucp_ep_params_t, address); OFF(ucp_ep_params_t, err_mode);
    OFF(ucp_ep_params_t, err_handler); OFF(ucp_ep_params_t, user_data);
    OFF(ucp_ep_params_t, flags); OFF(ucp_ep_params_t, sockaddr);
    OFF(ucp_ep_params_t, conn_request); OFF(ucp_ep_params_t, name);
    OFF(ucp_ep_params_t, local_sockaddr);
    SIZE(ucp_mem_map_params_t);
    OFF(ucp_mem_map_params_t, address); OFF(ucp_mem_map_params_t, length);
    OFF(ucp_mem_map_params_t, flags); OFF(ucp_mem_map_params_t, prot);
    OFF(ucp_mem_map_params_t, memory_type);
    SIZE(ucp_am_recv_param_t);
    OFF(ucp_am_recv_param_t, recv_attr); OFF(ucp_am_recv_param_t, reply_ep);
    SIZE(ucp_am_handler_param_t);
    OFF(ucp_am_handler_param_t, id); OFF(ucp_am_handler_param_t, flags);
    OFF(ucp_am_handler_param_t, cb); OFF(ucp_am_handler_param_t, arg);
    SIZE(ucp_request_param_t);
    OFF(ucp_request_param_t, flags); OFF(ucp_request_param_t, request);
    OFF(ucp_request_param_t, cb); OFF(ucp_request_param_t, datatype);
    OFF(ucp_request_param_t, user_data); OFF(ucp_request_param_t, reply_buffer);
    OFF(ucp_request_param_t, memory_type); OFF(ucp_request_param_t, recv_info);
    OFF(ucp_request_param_t, memh);

    VAL(UCP_API_MAJOR); VAL(UCP_API_MINOR);
    VAL(UCS_OK); VAL(UCS_INPROGRESS); VAL(UCS_ERR_NO_RESOURCE); VAL(UCS_ERR_BUSY);
    VAL(UCS_ERR_INVALID_PARAM); VAL(UCS_ERR_NOT_CONNECTED); VAL(UCS_ERR_CONNECTION_RESET);
    VAL(UCS_ERR_LAST);
    VAL(UCP_PARAM_FIELD_FEATURES); VAL(UCP_PARAM_FIELD_MT_WORKERS_SHARED);
    VAL(UCP_PARAM_FIELD_NAME);
    VAL(UCP_FEATURE_RMA); VAL(UCP_FEATURE_AMO64); VAL(UCP_FEATURE_WAKEUP);
    VAL(UCP_FEATURE_AM);
    VAL(UCP_WORKER_PARAM_FIELD_THREAD_MODE);
    VAL(UCS_THREAD_MODE_SINGLE); VAL(UCS_THREAD_MODE_SERIALIZED);
    VAL(UCS_THREAD_MODE_MULTI);
    VAL(UCP_EP_PARAM_FIELD_REMOTE_ADDRESS); VAL(UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE);
    VAL(UCP_EP_PARAM_FIELD_ERR_HANDLER); VAL(UCP_ERR_HANDLING_MODE_PEER);
    VAL(UCP_EP_CLOSE_FLAG_FORCE);
    VAL(UCP_MEM_MAP_PARAM_FIELD_ADDRESS); VAL(UCP_MEM_MAP_PARAM_FIELD_LENGTH);
    VAL(UCP_AM_HANDLER_PARAM_FIELD_ID); VAL(UCP_AM_HANDLER_PARAM_FIELD_FLAGS);
    VAL(UCP_AM_HANDLER_PARAM_FIELD_CB); VAL(UCP_AM_HANDLER_PARAM_FIELD_ARG);
    VAL(UCP_AM_FLAG_WHOLE_MSG); VAL(UCP_AM_SEND_FLAG_EAGER);
    VAL(UCP_AM_RECV_ATTR_FLAG_RNDV);
    VAL(UCP_OP_ATTR_FIELD_FLAGS); VAL(UCP_OP_ATTR_FIELD_REPLY_BUFFER);
    VAL(UCP_OP_ATTR_FIELD_DATATYPE); VAL(UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL);
    VAL(UCP_OP_ATTR_FIELD_CALLBACK); VAL(UCP_OP_ATTR_FIELD_USER_DATA);
    VAL(ucp_dt_make_contig(1)); VAL(ucp_dt_make_contig(8));
    VAL(UCP_ATOMIC_OP_ADD); VAL(UCP_ATOMIC_OP_SWAP); VAL(UCP_ATOMIC_OP_CSWAP);
    VAL(UCP_ATOMIC_OP_AND); VAL(UCP_ATOMIC_OP_OR); VAL(UCP_ATOMIC_OP_XOR);
    return 0;
}
