/* What every front door shares (door.h). */
#include "door.h"
#include "error.h"

ca_peer door_peer(const http_request *req) {
        return (ca_peer) {
                .der = req->peer_cert,
                .len = req->peer_cert_len,
                .verified = req->peer_verified,
                .expired = req->peer_expired,
                .not_yet_valid = req->peer_not_yet_valid,
                .valid_from = req->peer_valid_from,
        };
}

void door_respond_refusal(http_response *resp, const ca_result *res, const char *retry_key, int64_t now) {
        int r = res->error < 0 ? res->error : -HWID_E_INTERNAL;

        /* The error's detail as the core left it, for http_respond_error(). */
        hwid_fail((hwid_err) -r, "%s", res->message);
        http_respond_error(resp, r);
        if (retry_key && res->retry_at > now)
                http_error_retry_at(resp, retry_key, res->retry_at, now);
}
