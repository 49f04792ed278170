// CMosquitto: libmosquitto (Eclipse Mosquitto's MQTT client library) for Swift.
//
// Everything is used directly from <mosquitto.h>; only its macros are restated here as constants.
// Debian package: libmosquitto-dev.
#ifndef CMOSQUITTO_SHIM_H
#define CMOSQUITTO_SHIM_H

#include <mosquitto.h>

#if !defined(LIBMOSQUITTO_MAJOR) || LIBMOSQUITTO_MAJOR < 2
#error "geofence needs libmosquitto 2 (Debian's libmosquitto-dev)"
#endif

static const int CMosquitto_PROTOCOL_V311 = MQTT_PROTOCOL_V311;

#endif
