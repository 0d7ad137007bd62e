# A Debian 12 machine for the course, for students whose computer is not one (macOS, Windows): the image holds
# what `./labctl setup` installs (Debian 12's Bazel 4.2.3, the libraries, the grading user) and nothing of the
# course; the checkout is mounted at /workspace (.devcontainer/devcontainer.json does it, or:
#   docker build -t distlab . && docker run --rm -it -v "$PWD":/workspace distlab
# then ./labctl test inside). README, "Supported platforms", says how these steps were checked.
FROM debian:12

ENV DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8

# setup reads only its own package list, so labctl alone is enough to install what the course needs.
COPY labctl /opt/distlab/labctl
RUN /opt/distlab/labctl setup \
    && rm -rf /var/lib/apt/lists/*

# The checkout belongs to the user on the host; git refuses to work in a folder another user owns unless told.
RUN git config --system --add safe.directory /workspace

WORKDIR /workspace
CMD ["bash"]
