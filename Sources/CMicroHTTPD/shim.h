#ifndef CMICROHTTPD_SHIM_H
#define CMICROHTTPD_SHIM_H

#include <stdint.h>
#include <sys/socket.h>
#include <microhttpd.h>

// MHD_start_daemon is variadic, which Swift cannot call: one fixed set of options here.
// One internal polling thread (a scrape is small and rare), bounded in connections and in
// time per connection, bound to the given address only.
static inline struct MHD_Daemon *CMicroHTTPD_start(const struct sockaddr *address, uint16_t port,
                                                   MHD_AccessHandlerCallback handler, void *context,
                                                   unsigned int connectionLimit,
                                                   unsigned int connectionTimeout,
                                                   unsigned int ipv6) {
    unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL;
    if (ipv6) flags |= MHD_USE_IPv6;
    return MHD_start_daemon(flags, port, NULL, NULL, handler, context,
                            MHD_OPTION_SOCK_ADDR, address,
                            MHD_OPTION_CONNECTION_LIMIT, connectionLimit,
                            MHD_OPTION_PER_IP_CONNECTION_LIMIT, connectionLimit,
                            MHD_OPTION_CONNECTION_TIMEOUT, connectionTimeout,
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)65536,
                            MHD_OPTION_END);
}

// The port the daemon listens on (for port 0: the one the kernel chose), or 0.
static inline uint16_t CMicroHTTPD_port(struct MHD_Daemon *daemon) {
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_BIND_PORT);
    return info ? info->port : 0;
}

// Queues a copy of `body` as the response with this status and content type.
static inline enum MHD_Result CMicroHTTPD_respond(struct MHD_Connection *connection, unsigned int status,
                                                  const char *contentType, const void *body, size_t length) {
    struct MHD_Response *response =
        MHD_create_response_from_buffer(length, (void *)body, MHD_RESPMEM_MUST_COPY);
    if (response == NULL) return MHD_NO;
    MHD_add_response_header(response, "Content-Type", contentType);
    MHD_add_response_header(response, "Cache-Control", "no-store");
    enum MHD_Result result = MHD_queue_response(connection, status, response);
    MHD_destroy_response(response);
    return result;
}

#endif
