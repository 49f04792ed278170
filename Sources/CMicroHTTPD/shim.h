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

// The server with the HTTP API on it (`run --api`): a thread per connection (an event stream's reader
// blocks while it waits for events), a callback when a request ends (its state is released), and TLS when
// `certificate` and `key` (PEM text) are given.
static inline struct MHD_Daemon *CMicroHTTPD_startAPI(const struct sockaddr *address, uint16_t port,
                                                      MHD_AccessHandlerCallback handler, void *context,
                                                      MHD_RequestCompletedCallback completed,
                                                      unsigned int connectionLimit, unsigned int perAddressLimit,
                                                      unsigned int connectionTimeout, unsigned int ipv6,
                                                      const char *certificate, const char *key) {
    unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL;
    if (ipv6) flags |= MHD_USE_IPv6;
    if (certificate != NULL && key != NULL) {
        flags |= MHD_USE_TLS;
        return MHD_start_daemon(flags, port, NULL, NULL, handler, context,
                                MHD_OPTION_SOCK_ADDR, address,
                                MHD_OPTION_CONNECTION_LIMIT, connectionLimit,
                                MHD_OPTION_PER_IP_CONNECTION_LIMIT, perAddressLimit,
                                MHD_OPTION_CONNECTION_TIMEOUT, connectionTimeout,
                                MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)65536,
                                MHD_OPTION_NOTIFY_COMPLETED, completed, context,
                                MHD_OPTION_HTTPS_MEM_CERT, certificate,
                                MHD_OPTION_HTTPS_MEM_KEY, key,
                                MHD_OPTION_END);
    }
    return MHD_start_daemon(flags, port, NULL, NULL, handler, context,
                            MHD_OPTION_SOCK_ADDR, address,
                            MHD_OPTION_CONNECTION_LIMIT, connectionLimit,
                            MHD_OPTION_PER_IP_CONNECTION_LIMIT, perAddressLimit,
                            MHD_OPTION_CONNECTION_TIMEOUT, connectionTimeout,
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)65536,
                            MHD_OPTION_NOTIFY_COMPLETED, completed, context,
                            MHD_OPTION_END);
}

// Whether this libmicrohttpd was built with TLS (Debian's is, with GnuTLS).
static inline int CMicroHTTPD_hasTLS(void) { return MHD_is_feature_supported(MHD_FEATURE_TLS) == MHD_YES; }

// A request header's value, or NULL.
static inline const char *CMicroHTTPD_header(struct MHD_Connection *connection, const char *name) {
    return MHD_lookup_connection_value(connection, MHD_HEADER_KIND, name);
}

// A query argument's value (decoded), or NULL.
static inline const char *CMicroHTTPD_argument(struct MHD_Connection *connection, const char *name) {
    return MHD_lookup_connection_value(connection, MHD_GET_ARGUMENT_KIND, name);
}

// Queues a copy of `body` with this status, content type and, when `name` is not NULL, one more header.
static inline enum MHD_Result CMicroHTTPD_respondWith(struct MHD_Connection *connection, unsigned int status,
                                                      const char *contentType, const void *body, size_t length,
                                                      const char *name, const char *value) {
    struct MHD_Response *response =
        MHD_create_response_from_buffer(length, (void *)body, MHD_RESPMEM_MUST_COPY);
    if (response == NULL) return MHD_NO;
    MHD_add_response_header(response, "Content-Type", contentType);
    MHD_add_response_header(response, "Cache-Control", "no-store");
    if (name != NULL && value != NULL) MHD_add_response_header(response, name, value);
    enum MHD_Result result = MHD_queue_response(connection, status, response);
    MHD_destroy_response(response);
    return result;
}

// What a stream's reader returns at its end.
static const ssize_t CMicroHTTPD_endOfStream = MHD_CONTENT_READER_END_OF_STREAM;

// Queues a response of unknown length whose body `reader` produces (an event stream), chunked.
static inline enum MHD_Result CMicroHTTPD_respondStream(struct MHD_Connection *connection, const char *contentType,
                                                        MHD_ContentReaderCallback reader, void *context,
                                                        MHD_ContentReaderFreeCallback release) {
    struct MHD_Response *response = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, reader, context, release);
    if (response == NULL) {
        release(context);
        return MHD_NO;
    }
    MHD_add_response_header(response, "Content-Type", contentType);
    MHD_add_response_header(response, "Cache-Control", "no-store");
    MHD_add_response_header(response, "X-Accel-Buffering", "no");
    enum MHD_Result result = MHD_queue_response(connection, 200, response);
    MHD_destroy_response(response);
    return result;
}

#endif
