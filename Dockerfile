# syntax=docker/dockerfile:1.7
# ArkGPU's image for those who build with a container daemon (docker build, podman
# build, buildah bud):
#     docker build -t arkgpu/arkgpu:0.1.0 .
# `make image` builds the same image without a daemon or registry. Both follow
# deploy/image/ (image.toml, packages.txt, dpkg-slim.cfg, requirements.txt,
# install-python.sh); tests/packaging/test_image_spec.py keeps this file in step
# with it. docs/IMAGE.md says what is in the image and why.

# The wheels: ArkGPU's, built from this checkout (gcc and make compile the limiter's
# native parts; CFLAGS without -g, as `make image`), the pinned ones of
# requirements.txt, and the pip that installs them (never installed itself).
FROM debian:bookworm AS wheels
RUN apt-get update \
 && apt-get install -y --no-install-recommends gcc make libc6-dev python3-pip \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN CFLAGS=-O2 SOURCE_DATE_EPOCH=1767225600 python3 -m pip wheel -q --no-deps -w /wheels . \
 && python3 -m pip download -q --no-deps --only-binary=:all: -d /wheels \
        -r deploy/image/requirements.txt pip==26.3

# The image: Debian's minbase (bookworm-slim), the Debian packages, the Python ones.
FROM debian:bookworm-slim
COPY deploy/image/dpkg-slim.cfg /etc/dpkg/dpkg.cfg.d/99arkgpu
RUN --mount=type=bind,source=deploy/image/packages.txt,target=/tmp/packages.txt \
    apt-get update \
 && apt-get install -y --no-install-recommends $(sed 's/#.*//' /tmp/packages.txt) \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/* /var/log/*
RUN --mount=type=bind,from=wheels,source=/wheels,target=/tmp/wheels \
    --mount=type=bind,source=deploy/image,target=/tmp/spec \
    sh /tmp/spec/install-python.sh /tmp/wheels /tmp/spec/requirements.txt
ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
ENV PYTHONDONTWRITEBYTECODE=1
ENV PYTHONUNBUFFERED=1
ENV LANG=C.UTF-8
LABEL org.opencontainers.image.title="arkgpu"
LABEL org.opencontainers.image.description="ArkGPU: GPU sharing for Kubernetes (extender, webhook, device plugin, node runtime, DRA driver)"
LABEL org.opencontainers.image.licenses="Apache-2.0"
LABEL org.opencontainers.image.version="0.1.0"
WORKDIR /
ENTRYPOINT ["arkgpu"]
CMD ["--help"]
