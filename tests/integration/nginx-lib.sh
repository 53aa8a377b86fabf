#!/bin/bash
# nginx-lib.sh — an nginx of the test's own (Debian's nginx, as a relying
# party: docs/USING.md), every file of it in $T/nginx, on a loopback port.
# Sourced after lib.sh.

# nginx_run LINES — starts nginx with one TLS server on 127.0.0.1:NGINX_PORT
# (set here) whose directives are LINES (certificate, client checks,
# locations), and waits for its port. NGINX_PID is tracked: the exit trap
# stops it; its error log is shown when the test fails.
nginx_run() {
        NGINX_PORT=$(free_port)
        mkdir -p "$T/nginx/logs"
        cat >"$T/nginx/nginx.conf" <<CONF
daemon off;
master_process on;
worker_processes 1;
pid $T/nginx/nginx.pid;
error_log $T/nginx/logs/error.log info;
events { worker_connections 64; }
http {
    access_log $T/nginx/logs/access.log;
    client_body_temp_path $T/nginx/body;
    proxy_temp_path $T/nginx/proxy;
    fastcgi_temp_path $T/nginx/fastcgi;
    uwsgi_temp_path $T/nginx/uwsgi;
    scgi_temp_path $T/nginx/scgi;
    server {
        listen 127.0.0.1:$NGINX_PORT ssl;
$1
    }
}
CONF
        start_bg "$T/nginx.log" nginx -p "$T/nginx" -c "$T/nginx/nginx.conf"
        NGINX_PID=$BG_PID
        track_log "$T/nginx/logs/error.log"
        wait_for_port "$NGINX_PORT" 20 "$NGINX_PID"
}
