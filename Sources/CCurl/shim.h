// CCurl: libcurl, the HTTP client of the webhook sink (Debian's libcurl4-openssl-dev).
//
// curl_easy_setopt and curl_easy_getinfo are variadic, which Swift cannot call: the few settings the sink uses
// are made here, each with its type. The response's body is kept here too (its first bytes), and a transfer
// can be abandoned from another thread (the engine stopping), so Swift passes no C callbacks.
#ifndef CCURL_SHIM_H
#define CCURL_SHIM_H

#include <curl/curl.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>

#if LIBCURL_VERSION_NUM < 0x075500
#error "geofence needs libcurl 7.85 or later (Debian's libcurl4-openssl-dev)"
#endif

// One request's answer: the first bytes of the response body and how many came; libcurl's words for a failed
// transfer; and `stop`, set from any thread to abandon the transfer at its next progress callback.
typedef struct {
    char body[4096];
    size_t length;
    size_t total;
    char error[CURL_ERROR_SIZE];
    atomic_int stop;
} CCurlExchange;

static size_t CCurl_keepBody(char *data, size_t size, size_t count, void *context) {
    CCurlExchange *exchange = (CCurlExchange *)context;
    size_t n = size * count;
    size_t room = sizeof(exchange->body) - exchange->length;
    size_t kept = n < room ? n : room;
    memcpy(exchange->body + exchange->length, data, kept);
    exchange->length += kept;
    exchange->total += n;
    return n;
}

static int CCurl_progress(void *context, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d) {
    (void)a; (void)b; (void)c; (void)d;
    return atomic_load(&((CCurlExchange *)context)->stop) ? 1 : 0;
}

// Once per process, before the first handle (libcurl's global set-up, TLS included).
static inline CURLcode CCurl_globalInit(void) { return curl_global_init(CURL_GLOBAL_DEFAULT); }

static inline void CCurl_stop(CCurlExchange *exchange) { atomic_store(&exchange->stop, 1); }

// A handle for POSTs to `url`: http and https only, no redirects followed, no signals (threads), the whole
// request bounded by `timeoutMs` and its connect by `connectTimeoutMs`, TCP keep-alive probes on the
// connection it keeps between requests; `caFile` (or NULL: the system's CAs) for https.
static inline CURLcode CCurl_configure(CURL *h, const char *url, long timeoutMs, long connectTimeoutMs,
                                       const char *caFile, const char *userAgent, CCurlExchange *exchange) {
    CURLcode rc = CURLE_OK;
#define CCURL_SET(option, value) \
    if ((rc = curl_easy_setopt(h, option, value)) != CURLE_OK) return rc
    CCURL_SET(CURLOPT_URL, url);
    CCURL_SET(CURLOPT_PROTOCOLS_STR, "http,https");
    CCURL_SET(CURLOPT_FOLLOWLOCATION, 0L);
    CCURL_SET(CURLOPT_POST, 1L);
    CCURL_SET(CURLOPT_NOSIGNAL, 1L);
    CCURL_SET(CURLOPT_TIMEOUT_MS, timeoutMs);
    CCURL_SET(CURLOPT_CONNECTTIMEOUT_MS, connectTimeoutMs);
    CCURL_SET(CURLOPT_TCP_KEEPALIVE, 1L);
    CCURL_SET(CURLOPT_USERAGENT, userAgent);
    if (caFile != NULL) CCURL_SET(CURLOPT_CAINFO, caFile);
    CCURL_SET(CURLOPT_ERRORBUFFER, exchange->error);
    CCURL_SET(CURLOPT_WRITEFUNCTION, CCurl_keepBody);
    CCURL_SET(CURLOPT_WRITEDATA, (void *)exchange);
    CCURL_SET(CURLOPT_XFERINFOFUNCTION, CCurl_progress);
    CCURL_SET(CURLOPT_XFERINFODATA, (void *)exchange);
    CCURL_SET(CURLOPT_NOPROGRESS, 0L);
#undef CCURL_SET
    return rc;
}

// POSTs `length` bytes of `body` with `headers`, on the handle's kept connection if it has one; `status` gets
// the response's status (0 when none came).
static inline CURLcode CCurl_post(CURL *h, const void *body, size_t length, struct curl_slist *headers,
                                  CCurlExchange *exchange, long *status) {
    exchange->length = 0;
    exchange->total = 0;
    exchange->error[0] = 0;
    *status = 0;
    CURLcode rc = curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)length);
    if (rc == CURLE_OK) rc = curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    if (rc == CURLE_OK) rc = curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
    if (rc != CURLE_OK) return rc;
    rc = curl_easy_perform(h);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
    // The body pointer is the caller's, valid only for this call.
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, NULL);
    return rc;
}

#endif
