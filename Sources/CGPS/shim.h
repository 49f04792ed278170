// CGPS: libgps (gpsd's client library) for Swift.
//
// Only what Swift cannot import well is wrapped here; everything else is used
// directly from <gps.h>. Debian package: libgps-dev.
#ifndef CGPS_SHIM_H
#define CGPS_SHIM_H

#include <gps.h>

// The layout of struct gps_data_t and the meaning of its fields change with every
// major API version; GeofenceGPSD is written against API 11 (gpsd 3.21 and 3.22).
#if !defined(GPSD_API_MAJOR_VERSION) || GPSD_API_MAJOR_VERSION != 11
#error "geofence needs libgps with GPSD_API_MAJOR_VERSION 11 (gpsd 3.21/3.22, Debian's libgps-dev); the installed <gps.h> has a different API version"
#endif

// gps_stream() flags (macros in <gps.h>).
static const unsigned int CGPS_WATCH_ENABLE = WATCH_ENABLE;
static const unsigned int CGPS_WATCH_JSON = WATCH_JSON;
static const unsigned int CGPS_WATCH_DEVICE = WATCH_DEVICE;

// struct devconfig_t.flags: what kinds of data gpsd has seen from a device.
static const int CGPS_SEEN_GPS = SEEN_GPS;
static const int CGPS_SEEN_RTCM2 = SEEN_RTCM2;
static const int CGPS_SEEN_RTCM3 = SEEN_RTCM3;
static const int CGPS_SEEN_AIS = SEEN_AIS;

// The `set` masks (TIME_SET, LATLON_SET, MODE_SET, VERSION_SET, …) are deliberately not
// exposed: in libgps 3.22 they carry over between reads (a SKY read still has LATLON_SET
// and MODE_SET from the TPV before it), so they can't say what a read contained.
// GeofenceGPSD tells reports apart by their JSON class instead (GPSDSession.decode).

// gps_send() is variadic (printf-style); never pass a command as the format.
static inline int CGPS_send(struct gps_data_t *gpsdata, const char *command) {
    return gps_send(gpsdata, "%s", command);
}

// The fix, device and version live in (or next to) an anonymous union and fixed-size
// char arrays that Swift imports as large tuples; these accessors hand out pointers.
static inline const struct gps_fix_t *CGPS_fix(const struct gps_data_t *gpsdata) {
    return &gpsdata->fix;
}

static inline const struct version_t *CGPS_version(const struct gps_data_t *gpsdata) {
    return &gpsdata->version;
}

static inline const char *CGPS_error_message(const struct gps_data_t *gpsdata) {
    return gpsdata->error;
}

// The device that shipped the last report (from a TPV's or DEVICE's "device"/"path").
static inline const struct devconfig_t *CGPS_reporting_device(const struct gps_data_t *gpsdata) {
    return &gpsdata->dev;
}

// The device list of the last DEVICES report (libgps keeps at most MAXUSERDEVS = 4).
static inline int CGPS_device_count(const struct gps_data_t *gpsdata) {
    int n = gpsdata->devices.ndevices;
    if (n < 0) return 0;
    return n < MAXUSERDEVS ? n : MAXUSERDEVS;
}

static inline const struct devconfig_t *CGPS_device_at(const struct gps_data_t *gpsdata, int index) {
    return &gpsdata->devices.list[index];
}

static inline const char *CGPS_device_path(const struct devconfig_t *device) { return device->path; }
static inline const char *CGPS_device_driver(const struct devconfig_t *device) { return device->driver; }
static inline const char *CGPS_device_subtype(const struct devconfig_t *device) { return device->subtype; }
static inline const char *CGPS_device_subtype1(const struct devconfig_t *device) { return device->subtype1; }

static inline const char *CGPS_version_release(const struct version_t *version) { return version->release; }
static inline const char *CGPS_version_revision(const struct version_t *version) { return version->rev; }

#endif
