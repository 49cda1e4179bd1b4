#!/bin/sh
# Run inside the image build, as root, on the Debian root filesystem that becomes the appliance:
# remove what the running appliance never uses (package management, perl, build-time Python
# tooling, TLS certificates for a container without network, docs), then prove that Python, its
# extension modules, the installed wheels and tmux still load.
set -eu

# Packages not needed at run time, removed when present. dpkg stays (the status file lists what
# is inside, for scanners). `--force-depends` because apt and perl-base are "required".
drop="apt libapt-pkg6.0 gpgv debian-archive-keyring libgnutls30 libhogweed6 libnettle8
      libp11-kit0 libtasn1-6 libidn2-0 libunistring2 perl-base debconf adduser
      e2fsprogs libext2fs2 libss2 logsave login passwd libsemanage2 libsemanage-common
      libsepol2 python3-venv python3-pip-whl python3-setuptools-whl python3-distutils
      python3-lib2to3 ca-certificates openssl"
present=""
for pkg in $drop; do
  if dpkg-query -W -f '${Status}' "$pkg" 2>/dev/null | grep -q 'ok installed'; then
    present="$present $pkg"
  fi
done
if [ -n "$present" ]; then
  # shellcheck disable=SC2086  # one word per package
  dpkg --purge --force-depends --force-remove-essential $present >/dev/null 2>&1 || {
    # Maintainer scripts may need what was already removed; the files are what matters.
    # shellcheck disable=SC2086
    dpkg --purge --force-all $present >/dev/null
  }
fi

rm -rf /var/cache/apt /var/lib/apt /etc/apt /var/cache/debconf /var/log/* \
  /usr/share/doc /usr/share/man /usr/share/info /usr/share/lintian /usr/share/common-licenses \
  /usr/share/bash-completion /usr/share/zsh /etc/ssl/certs /usr/lib/ssl/certs \
  /usr/lib/python3.11/test /usr/lib/python3.11/idlelib /usr/lib/python3.11/tkinter \
  /usr/lib/python3.11/turtledemo /usr/lib/python3.11/ensurepip /usr/lib/python3.11/pydoc_data
find /usr/share/locale -mindepth 1 -maxdepth 1 -not -name locale.alias -exec rm -rf {} + \
  2>/dev/null || true
# glibc's iconv modules: Python has its own codecs and tmux speaks UTF-8 only.
find /usr/lib/x86_64-linux-gnu/gconv -name '*.so' -delete 2>/dev/null || true

# Everything the appliance runs must still load.
for binary in /usr/bin/tmux /usr/bin/python3; do
  if ldd "$binary" | grep -q 'not found'; then
    ldd "$binary" >&2; echo "prune-rootfs: $binary lost a library" >&2; exit 1
  fi
done
find / -xdev -name '*.so*' -type f \( -path '/opt/*' -o -path '/usr/lib/python3*' \
  -o -path '/usr/local/lib/python3*' \) | while read -r lib; do
  if ldd "$lib" 2>/dev/null | grep -q 'not found'; then
    ldd "$lib" >&2; echo "prune-rootfs: $lib lost a library" >&2; exit 1
  fi
done
tmux -V >/dev/null
/opt/kael/bin/python -c 'import ssl, sqlite3, ctypes, zoneinfo, kael_thread_rebuild.interfaces.cli, kael_thread_rebuild.interfaces.mcp_server, kael_thread_rebuild.interfaces.mcp_tools, jeepney, cryptography.hazmat.bindings._rust'
