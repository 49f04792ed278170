// CNATS: nats.c, the NATS C client with JetStream and its key-value store, for Swift.
//
// Everything is used directly from <nats/nats.h>; nothing is restated here.
// Debian package: libnats-dev (nats.c 3.4).
#ifndef CNATS_SHIM_H
#define CNATS_SHIM_H

#include <nats/nats.h>

#if !defined(NATS_VERSION_MAJOR) || NATS_VERSION_MAJOR < 3 || (NATS_VERSION_MAJOR == 3 && NATS_VERSION_MINOR < 4)
#error "geofence needs nats.c 3.4 or later (Debian's libnats-dev)"
#endif

#endif
