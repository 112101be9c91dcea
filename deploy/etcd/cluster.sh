#!/usr/bin/env bash
# A local 3-member etcd cluster on loopback with mutual TLS (between members and to clients), for
# development and tests. Everything lives under DIR: pki/ (CA, member and client certificates made
# with openssl), m1..m3/ (data), m1..m3.conf (member-tls.conf filled in), *.log and *.pid.
#
#   deploy/etcd/cluster.sh start DIR [BASE_PORT]   # members listen on BASE+10*i (clients), +1 (peers)
#   deploy/etcd/cluster.sh url DIR                 # the store URL for `cca server --store` / `cca init --etcd`
#   deploy/etcd/cluster.sh stop DIR                # stops every member (data and certificates stay)
#   deploy/etcd/cluster.sh status DIR
#   deploy/etcd/cluster.sh stop-member DIR m2      # one member, e.g. to see quorum kept
#   deploy/etcd/cluster.sh start-member DIR m2     # it rejoins and catches up
#
# BASE_PORT defaults to 23790 (m1 23800/23801, m2 23810/23811, m3 23820/23821).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
members=(m1 m2 m3)

usage() { sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
[ $# -ge 2 ] || usage
action=$1
dir=$(mkdir -p "$2" && cd "$2" && pwd)

make_pki() {
    local pki=$dir/pki
    [ -f "$pki/client.crt" ] && return
    install -d -m 0700 "$pki"
    openssl ecparam -name prime256v1 -genkey -noout -out "$pki/ca.key" 2>/dev/null
    openssl req -x509 -new -key "$pki/ca.key" -sha256 -days 3650 -subj "/CN=ccattler-etcd-ca" \
        -out "$pki/ca.crt" 2>/dev/null
    local name ext
    for name in "${members[@]}" client; do
        if [ "$name" = client ]; then
            ext="extendedKeyUsage=clientAuth"
        else
            # a member is a server to clients and peers, and a client to its peers
            ext="subjectAltName=IP:127.0.0.1,DNS:localhost
extendedKeyUsage=serverAuth,clientAuth"
        fi
        openssl ecparam -name prime256v1 -genkey -noout -out "$pki/$name.key" 2>/dev/null
        openssl req -new -key "$pki/$name.key" -subj "/CN=$name" -out "$pki/$name.csr" 2>/dev/null
        openssl x509 -req -in "$pki/$name.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
            -days 825 -sha256 -extfile <(printf '%s\n' "$ext") -out "$pki/$name.crt" 2>/dev/null
        rm -f "$pki/$name.csr"
    done
    chmod 0600 "$pki"/*.key
}

write_confs() {
    local base=$1 cluster="" i=0 name
    for name in "${members[@]}"; do
        cluster+="${cluster:+,}$name=https://127.0.0.1:$((base + 10 * (i + 1) + 1))"
        i=$((i + 1))
    done
    i=0
    for name in "${members[@]}"; do
        i=$((i + 1))
        sed -e "s|@NAME@|$name|g" -e "s|@DIR@|$dir|g" \
            -e "s|@CLIENT@|https://127.0.0.1:$((base + 10 * i))|g" \
            -e "s|@PEER@|https://127.0.0.1:$((base + 10 * i + 1))|g" -e "s|@CLUSTER@|$cluster|g" \
            -e "s|@HEARTBEAT@|${ETCD_HEARTBEAT:-50}|g" -e "s|@ELECTION@|${ETCD_ELECTION:-500}|g" \
            "$here/member-tls.conf" > "$dir/$name.conf"
    done
    echo "$base" > "$dir/base-port"
}

conf_value() { sed -n "s/^$2=//p" "$dir/$1.conf"; }

# Alive and not a zombie (a killed member is reaped only when its parent, often init, gets to it).
running() {
    local pid
    [ -f "$dir/$1.pid" ] || return 1
    pid=$(cat "$dir/$1.pid")
    kill -0 "$pid" 2>/dev/null && [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" != Z ]
}

start_member() {
    local name=$1
    running "$name" && return
    # start.sh reads the member's file; setsid keeps it alive after this script (and its terminal) ends
    setsid "$here/start.sh" "$dir/$name.conf" >> "$dir/$name.log" 2>&1 < /dev/null &
    echo $! > "$dir/$name.pid"
}

stop_member() {
    local name=$1 pid
    running "$name" || { rm -f "$dir/$name.pid"; return; }
    pid=$(cat "$dir/$name.pid")
    kill "$pid"
    for _ in $(seq 100); do running "$name" || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$dir/$name.pid"
}

url() {
    local endpoints="" name
    for name in "${members[@]}"; do
        endpoints+="${endpoints:+,}$(conf_value "$name" ETCD_ADVERTISE_CLIENT_URLS | sed 's|https://||')"
    done
    echo "etcd://$endpoints?ca=$dir/pki/ca.crt&cert=$dir/pki/client.crt&key=$dir/pki/client.key"
}

healthy() {
    local endpoints
    endpoints=$(url | sed -e 's|etcd://||' -e 's|?.*||' -e 's|\([^,]*\)|https://\1|g')
    ETCDCTL_API=3 etcdctl --endpoints "$endpoints" --cacert "$dir/pki/ca.crt" --cert "$dir/pki/client.crt" \
        --key "$dir/pki/client.key" --dial-timeout 1s --command-timeout 2s endpoint health "$@"
}

case "$action" in
    start)
        command -v etcd > /dev/null || { echo "etcd is not installed (apt-get install etcd-server)" >&2; exit 1; }
        make_pki
        [ -f "$dir/m1.conf" ] || write_confs "${3:-23790}"
        for name in "${members[@]}"; do start_member "$name"; done
        for _ in $(seq 150); do
            if healthy > /dev/null 2>&1; then url; exit 0; fi
            for name in "${members[@]}"; do
                running "$name" || { echo "member $name exited; see $dir/$name.log" >&2; exit 1; }
            done
            sleep 0.2
        done
        echo "the cluster did not become healthy within 30 s; see $dir/m*.log" >&2
        exit 1 ;;
    stop)
        for name in "${members[@]}"; do stop_member "$name"; done ;;
    url) url ;;
    status)
        for name in "${members[@]}"; do
            if running "$name"; then echo "$name running (pid $(cat "$dir/$name.pid"))"; else echo "$name stopped"; fi
        done
        healthy --cluster 2>&1 || true ;;
    start-member) [ $# -eq 3 ] || usage; start_member "$3" ;;
    stop-member) [ $# -eq 3 ] || usage; stop_member "$3" ;;
    *) usage ;;
esac
