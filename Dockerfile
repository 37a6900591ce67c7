# conduit container image: multi-stage, debian:bookworm.
#
# The build stage runs exactly what CI runs before testing: scripts/bootstrap
# (Debian packages) and the Meson build. The runtime stage holds conduitd,
# conduitctl, conduit-perf, libconduit and config/.
#
# What the container needs at run time:
#   - hugepages: mount the host's hugetlbfs (-v /dev/hugepages:/dev/hugepages)
#     after reserving pages on the host (echo 1024 > /sys/kernel/mm/hugepages/
#     hugepages-2048kB/nr_hugepages); or set EAL args "--no-huge -m 512" in the
#     policy for small deployments and tests.
#   - privileges: --privileged, or at least --cap-add IPC_LOCK,NET_ADMIN,NET_RAW,
#     SYS_ADMIN (af_xdp/af_packet vdevs and DPDK memory locking), and
#     --ulimit memlock=-1.
#   - the NIC: --network host with a vdev (net_af_xdp/net_af_packet on a host
#     interface), or the VFIO device (--device /dev/vfio/...) for a PCI port.
#   - the control socket: a volume at /run/conduit shared with the training
#     containers (-v /run/conduit:/run/conduit); clients connect to
#     /run/conduit/conduitd.sock and must be in the socket's group.
#   - the policy: -v /etc/conduit:/etc/conduit:ro (defaults to the example).

FROM debian:bookworm AS build
WORKDIR /src
COPY scripts/bootstrap scripts/bootstrap
RUN scripts/bootstrap
COPY . .
RUN meson setup build -Ddaemon=enabled -Dtests=false --prefix=/opt/conduit \
 && ninja -C build \
 && meson install -C build --destdir /out

FROM debian:bookworm AS runtime
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      dpdk libspdlog1.10 libfmt9 libyaml-cpp0.7 libsystemd0 libxdp1 libbpf1 iproute2 \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/opt/conduit /opt/conduit
COPY config/ /etc/conduit/
ENV PATH=/opt/conduit/bin:$PATH \
    LD_LIBRARY_PATH=/opt/conduit/lib/x86_64-linux-gnu
ENTRYPOINT ["/opt/conduit/bin/conduitd"]
CMD ["--config", "/etc/conduit/conduitd.yaml"]
