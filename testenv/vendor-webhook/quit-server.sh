# The stand-in of a vendor's long-running sidecar on the end-to-end tests' node, for busybox
# (vendor-webhook --sidecar-command '["/bin/busybox", "sh", "-c", <this file>]'). It reads the
# variables vendor-webhook gives the sidecar (node.go):
#   VENDOR_PORTS      ports to listen on (the quit port and the ports of the vendor's probes)
#   VENDOR_QUIT_PORT  VENDOR_QUIT_PATH: the vendor's quit endpoint (absent: none)
# Every GET or HEAD is answered 200 (the vendor's probes succeed); a POST to the quit path on
# the quit port is answered 200 and ends the sidecar with 0, as the vendor's quit endpoint
# ends the vendor's sidecar; any other request gets 404. SIGTERM or SIGINT end it with 0.
# (No file is written: the vendors' sidecars often have a read-only root filesystem.)
set -u
export VENDOR_MAIN=$$ VENDOR_QUIT_PORT="${VENDOR_QUIT_PORT:-}" VENDOR_QUIT_PATH="${VENDOR_QUIT_PATH:-}"

# One connection on stdin/stdout; $1 is the port it came to.
# shellcheck disable=SC2016  # (expanded by the handler's shell)
handler='
cr=$(printf "\r")
read -r method target _ || exit 0
path=${target%%\?*}
length=0
while read -r line; do
  line=${line%"$cr"}
  [ -z "$line" ] && break
  case $line in [Cc]ontent-[Ll]ength:*) length=${line#*:}; length=${length# } ;; esac
done
# the body, read so that closing the connection does not reset it before the answer arrives
[ "$length" -gt 0 ] 2>/dev/null && /bin/busybox head -c "$length" >/dev/null
reply() { printf "HTTP/1.1 %s\r\nContent-Length: 0\r\nConnection: close\r\n\r\n" "$1"; }
case $method in
  GET|HEAD) reply "200 OK" ;;
  POST)
    if [ "$1" = "$VENDOR_QUIT_PORT" ] && [ "$path" = "$VENDOR_QUIT_PATH" ]; then
      reply "200 OK"
      echo "quit-server: POST $path on :$1: quitting" >&2
      kill -TERM "$VENDOR_MAIN"
    else
      reply "404 Not Found"
    fi ;;
  *) reply "405 Method Not Allowed" ;;
esac
'

listeners="" listeners_ports=""
stop() {
  # shellcheck disable=SC2086  # (a list of PIDs)
  kill $listeners ${sleeper:-} 2>/dev/null
  echo "quit-server: $1: exiting 0" >&2
  exit 0
}
trap 'stop SIGTERM' TERM
trap 'stop SIGINT' INT

for port in ${VENDOR_PORTS:-} ${VENDOR_QUIT_PORT}; do
  case " $listeners_ports " in *" $port "*) continue ;; esac
  listeners_ports="$listeners_ports $port"
  /bin/busybox nc -ll -p "$port" -e /bin/busybox sh -c "$handler" handler "$port" &
  listeners="$listeners $!"
done
echo "quit-server: listening on${listeners_ports:- no port}; quit: ${VENDOR_QUIT_PATH:-none} on ${VENDOR_QUIT_PORT:-none}" >&2

# Wait for a signal: `wait` returns as soon as a trapped signal arrives.
while :; do
  /bin/busybox sleep 3600 &
  sleeper=$!
  wait "$sleeper"
done
