#!/usr/bin/env bash
# Checks a built edbstress .deb: `dpkg-deb --contents` lists the binary, the man pages
# and the shell completions, and `dpkg -i --root` into a clean directory tree installs
# a binary that runs and whose files match what it generates.
#
#   packaging/check-deb.sh target/debian/edbstress_0.1.0-1_amd64.deb
set -euo pipefail
deb="${1:?usage: check-deb.sh PACKAGE.deb}"

contents=$(dpkg-deb --contents "$deb")
for f in ./usr/bin/edbstress \
  ./usr/share/man/man1/edbstress.1.gz ./usr/share/man/man1/edbstress-run.1.gz \
  ./usr/share/bash-completion/completions/edbstress \
  ./usr/share/zsh/vendor-completions/_edbstress \
  ./usr/share/fish/vendor_completions.d/edbstress.fish; do
  if ! grep -q " $f\$" <<<"$contents"; then
    echo "check-deb: $f is missing from $deb; it holds:" >&2
    echo "$contents" >&2
    exit 1
  fi
done

# A clean tree with an empty dpkg database; dependencies (libc) are the host's.
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/var/lib/dpkg/info" "$root/var/lib/dpkg/updates" "$root/var/lib/dpkg/triggers"
touch "$root/var/lib/dpkg/status"
if ! dpkg --root="$root" --force-not-root --force-depends --log=/dev/null -i "$deb" \
  >"$root/dpkg.out" 2>&1; then
  cat "$root/dpkg.out" >&2
  exit 1
fi
dpkg --root="$root" -s edbstress | grep -q '^Status: install ok installed'

bin="$root/usr/bin/edbstress"
"$bin" --version
"$bin" run --help >/dev/null
"$bin" completions bash | cmp - "$root/usr/share/bash-completion/completions/edbstress"
"$bin" completions zsh | cmp - "$root/usr/share/zsh/vendor-completions/_edbstress"
"$bin" completions fish | cmp - "$root/usr/share/fish/vendor_completions.d/edbstress.fish"
"$bin" man | cmp - <(zcat "$root/usr/share/man/man1/edbstress.1.gz")
echo "check-deb: $deb: binary, $(grep -c '/man1/.*\.1\.gz$' <<<"$contents") man pages and 3 completions installed and working"
