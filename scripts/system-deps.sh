#!/usr/bin/env bash
# Install the Debian packages the tests and the lab run for real, when they are missing.
# As root it installs them; otherwise it prints the one apt-get line to run and fails.
set -euo pipefail

packages=(
    haproxy          # the load balancers of `prober lab`
    prometheus       # prometheus and promtool: metrics checks, rules tests, the e2e scrape
    nghttp2-client   # nghttp: an independent HTTP/2 client against the fake apiserver
    curl             # an independent HTTP/1.1 and HTTP/2 client
    iproute2         # network namespaces for tests that need more than loopback
    nftables         # nft: the lab's kernel LBs (DNAT by flow hash) and a vanished node
    conntrack        # conntrack -D: AWS's connection termination in the lab's kernel LBs
    etcd-server      # the lab's storage: the fake apiservers keep their objects in it
    chromium         # renders the HTML report in a test
    shellcheck       # lints deploy/ci's step scripts
)

missing=()
for pkg in "${packages[@]}"; do
    # Not `| grep -q`: grep leaving early would be a SIGPIPE, a failure under pipefail.
    if [[ $(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null) != *"ok installed" ]]; then
        missing+=("$pkg")
    fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

line="apt-get update && apt-get install -y --no-install-recommends ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
    echo "missing Debian packages: ${missing[*]}" >&2
    echo "run as root: $line" >&2
    exit 1
fi
echo "installing Debian packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
