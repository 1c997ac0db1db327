#!/bin/sh
# Installs ArkGPU's Python packages into the image's /usr/local. Both builds run it
# as root inside the image's root file system: `make image` in a chroot whose only
# writable places are /usr/local and /tmp (scripts/imagebuild/building.py), the
# Dockerfile in a RUN step.
#   $1  a directory of wheels: ArkGPU's (arkgpu-*.whl), those of requirements.txt
#       and pip's (image.toml's installer), which runs from its wheel and is never
#       installed
#   $2  requirements.txt (deploy/image/)
# Python bytecode is compiled here, as unchecked-hash .pyc files: the root file
# system is read-only at run time, and these carry no time stamp, so two builds
# give the same bytes.
set -eu
wheels=$1
requirements=$2
set -- "$wheels"/pip-*.whl
[ "$#" -eq 1 ] || { echo "install-python.sh: want one pip wheel in $wheels, found: $*" >&2; exit 2; }
pip=$1
set -- "$wheels"/arkgpu-*.whl
[ "$#" -eq 1 ] || { echo "install-python.sh: want one arkgpu wheel in $wheels, found: $*" >&2; exit 2; }
arkgpu=$1
python3 "$pip/pip" install --no-index --find-links "$wheels" --no-deps --only-binary=:all: \
    --no-compile --no-cache-dir --break-system-packages --disable-pip-version-check \
    --root-user-action=ignore --quiet -r "$requirements" "$arkgpu"
site=$(python3 -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
python3 -m compileall -q --invalidation-mode unchecked-hash "$site"
