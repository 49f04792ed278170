# geofence: build, test and demo on a Debian machine.
#
#   make demo    install what is missing, build, show the engine on a real gpsd with a recorded drive
#   make test    install what is missing, build, run every test
#   make deb     build geofence_VERSION_ARCH.deb (Docs/install.md)
#
# System packages are installed here (never by hand): the C libraries the package links against and
# Debian's gpsd, mosquitto (broker and clients) and nats-server, which the integration tests and the demo run
# privately (never the system's).

SWIFT       ?= swift
CONFIG      ?= debug
APT_PACKAGES = libsqlite3-dev libgps-dev gpsd libmosquitto-dev mosquitto mosquitto-clients libsystemd-dev libmicrohttpd-dev \
               libnats-dev nats-server libcurl4-openssl-dev libssl-dev \
               python3-prometheus-client curl openssl chromium libjs-leaflet $(DEB_PACKAGES)
# What `make deb` (and the package's check in `make test`) needs: debhelper and dpkg's tools to build the
# package, lintian to check it, systemd for `systemd-analyze verify` of its unit, util-linux for unshare.
DEB_PACKAGES = debhelper dpkg-dev fakeroot lintian pkg-config systemd util-linux
SUDO        := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
BIN          = .build/$(CONFIG)/geofence

PREFIX      ?= /usr/local

.PHONY: all deps build release test soak demo bench format lint clean help install uninstall deb fuzz fuzz-smoke \
	fuzz-build

all: build

help:
	@echo "make demo     build and run the demo (a private gpsd replaying a recorded drive)"
	@echo "make test     build and run every test"
	@echo "make build    build the debug binaries (.build/debug/geofence)"
	@echo "make release  build optimised binaries (.build/release/geofence)"
	@echo "make soak     the reliability scenarios at full length (Docs/reliability.md; about an hour)"
	@echo "make bench    run the benchmark executable (release), beside the C reference when $(REFERENCE_DIR) exists"
	@echo "make lint     swift format lint, strict"
	@echo "make install  install the binary and the systemd unit (PREFIX=/usr/local)"
	@echo "make deb      build the Debian package into .build/deb (DEB_CONFIG=debug for a quicker one)"
	@echo "make format   swift format, in place"
	@echo "make fuzz     run each libFuzzer harness for FUZZ_SECONDS (600); make fuzz-smoke: a few seconds each"

# Installs only the packages that are missing, so a second run does nothing and needs no network.
deps:
	@missing=""; \
	for p in $(APT_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "Installing Debian packages:$$missing"; \
	  $(SUDO) apt-get update -qq && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	fi

build: deps
	$(SWIFT) build -c $(CONFIG)

release: deps
	$(SWIFT) build -c release

# Tests run one at a time: many of them start real processes (gpsd, the daemon, hooks) and measure
# deadlines, which two cores shared by every test at once would turn into flakes. The short versions of
# the soak scenarios run here; `make soak` runs them at full length against the release binary.
# Then the library's example (Examples/print-events), built against this package as an application would,
# must print the events `geofence replay` prints on the same drive, typed; and every block of Swift in
# Docs/library.md must be one of its files, which that build compiles (Scripts/example-check.sh).
test: deps
	python3 Scripts/surface-check.py
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build --no-parallel
	Scripts/example-check.sh
	$(MAKE) --no-print-directory deb DEB_CONFIG=$(TEST_DEB_CONFIG) DEB_COMPRESS="-Zgzip -z1"
	Scripts/package-check.sh .build/deb/geofence_$(VERSION)_$(DEB_ARCH).deb

SOAK_FILTER ?= kill9Soak|ChaosTests|DiskFaultTests|LeakSoakTests|DaemonHookTests

soak: deps
	$(SWIFT) build --build-tests
	$(SWIFT) build -c release --product geofence
	GEOFENCE_SOAK=long GEOFENCE_BIN=$(CURDIR)/.build/release/geofence \
	  $(SWIFT) test --skip-build --no-parallel --filter '$(SOAK_FILTER)'

demo: deps
	$(SWIFT) build --product geofence
	$(SWIFT) build --product geofence-sim
	@Scripts/demo.sh .build/debug/geofence

# The geofence binary too: the benchmark times its commands (import, run) as a user runs them. With the C
# reference programs beside the checkout (../shared/perf-reference, issue 29), their comparison runs too: built
# in a temporary copy with gcc (skipped with a note when gcc or make is missing).
REFERENCE_DIR ?= ../shared/perf-reference
bench: deps
	$(SWIFT) build -c release --product geofence
	$(SWIFT) run -c release geofence-bench $(if $(wildcard $(REFERENCE_DIR)/Makefile),--reference $(REFERENCE_DIR))

# Fuzzing (Docs/reliability.md): libFuzzer harnesses in Fuzz/, built by swiftc with the toolchain's own
# libFuzzer runtime (no Debian package needed); corpora, crash inputs and logs under .build/fuzz/.
# FUZZ_PARALLEL=2 runs two harnesses at once. Not part of `make test`.
FUZZ_SECONDS       ?= 600
FUZZ_SMOKE_SECONDS ?= 10
FUZZ_PARALLEL      ?= 1

fuzz:
	FUZZ_SECONDS=$(FUZZ_SECONDS) FUZZ_PARALLEL=$(FUZZ_PARALLEL) Scripts/fuzz.sh run

fuzz-smoke:
	FUZZ_SECONDS=$(FUZZ_SMOKE_SECONDS) FUZZ_PARALLEL=$(FUZZ_PARALLEL) Scripts/fuzz.sh smoke

fuzz-build:
	Scripts/fuzz.sh build

lint:
	$(SWIFT) format lint --strict --recursive --configuration .swift-format Sources Tests Package.swift

format:
	$(SWIFT) format format --in-place --recursive --configuration .swift-format Sources Tests Package.swift

# The Debian package (Docs/install.md): debhelper builds it from debian/, the Swift runtime linked statically.
# DEB_CONFIG=debug builds it from a debug build (what `make test` checks, to keep its time bounded); the
# package to install is the release one.
DEB_CONFIG      ?= release
TEST_DEB_CONFIG ?= debug
VERSION          = $(shell dpkg-parsechangelog -S Version 2>/dev/null)
DEB_ARCH         = $(shell dpkg --print-architecture)

deb: deps
	GEOFENCE_CONFIG=$(DEB_CONFIG) GEOFENCE_DEB_DIR=.build/deb GEOFENCE_DEB_COMPRESS="$(DEB_COMPRESS)" SWIFT=$(SWIFT) \
	  debian/rules binary
	GEOFENCE_DEB_DIR=.build/deb debian/rules clean
	@echo "Built .build/deb/geofence_$(VERSION)_$(DEB_ARCH).deb ($(DEB_CONFIG)). Install: sudo apt install ./.build/deb/geofence_$(VERSION)_$(DEB_ARCH).deb"

# A source install (run as root: sudo make install): the binary, the systemd unit, the commented settings
# file (kept if there), and the geofence user the unit runs as. The package does the same the Debian way.
install: release
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)/etc/systemd/system $(DESTDIR)/etc/default
	install -m 0755 .build/release/geofence $(DESTDIR)$(PREFIX)/bin/geofence
	sed 's|/usr/local/bin/geofence|$(PREFIX)/bin/geofence|' Packaging/geofence.service \
	  > $(DESTDIR)/etc/systemd/system/geofence.service
	[ -e $(DESTDIR)/etc/default/geofence ] || install -m 0644 Packaging/geofence.default $(DESTDIR)/etc/default/geofence
	@if [ -z "$(DESTDIR)" ] && ! getent passwd geofence >/dev/null; then \
	  useradd --system --user-group --home-dir /var/lib/geofence --no-create-home --shell /usr/sbin/nologin geofence; \
	fi
	@echo "Installed. Start it with: sudo systemctl daemon-reload && sudo systemctl enable --now geofence"

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/geofence $(DESTDIR)/etc/systemd/system/geofence.service

clean:
	rm -rf .build
