#!/usr/bin/env bash
# Fetch the ONNX Runtime C headers the plugin EP compiles against, into an ignored folder.
# Debian ships them in libonnxruntime-dev; the .deb is downloaded with a private apt state and
# unpacked, never installed system-wide. Only headers are used: the EP links nothing of ORT.
# Usage: fetch_ort_headers.sh DEST   (headers end up in DEST/include/onnxruntime_*.h)
set -euo pipefail
dest=${1:?usage: fetch_ort_headers.sh DEST}
if [ -f "$dest/include/onnxruntime_ep_c_api.h" ]; then
  exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/lists/partial"
opts=(-oDir::State::Lists="$work/lists" -oDir::Etc::SourceList="$work/sources.list"
      -oDir::Etc::SourceParts=/dev/null -oDir::Cache="$work/cache" -oAPT::Sandbox::User=root)
# Accept any version >= 1.23 (the plugin EP compile API); sid first, experimental as fallback.
for suite in sid experimental; do
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $suite main" \
    > "$work/sources.list"
  if apt-get "${opts[@]}" -qq update >/dev/null 2>&1 \
     && (cd "$work" && apt-get "${opts[@]}" -qq download libonnxruntime-dev >/dev/null 2>&1); then
    break
  fi
done
deb=$(ls "$work"/libonnxruntime-dev_*.deb 2>/dev/null | head -n 1 || true)
if [ -z "$deb" ]; then
  echo "error: could not download libonnxruntime-dev from Debian (sid or experimental)." >&2
  echo "       Point ORT_INCLUDE_DIR at an ONNX Runtime >= 1.23 release's include/ folder instead." >&2
  exit 1
fi
dpkg -x "$deb" "$work/x"
hdr="$work/x/usr/include/onnxruntime"
if [ ! -f "$hdr/onnxruntime_ep_c_api.h" ]; then
  echo "error: $(basename "$deb") has no onnxruntime_ep_c_api.h (ONNX Runtime < 1.23?)." >&2
  exit 1
fi
mkdir -p "$dest/include"
cp -r "$hdr"/. "$dest/include/"
echo "ONNX Runtime headers from $(basename "$deb") -> $dest/include"
