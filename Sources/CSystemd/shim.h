#ifndef CSYSTEMD_SHIM_H
#define CSYSTEMD_SHIM_H

// sd_notify and sd_watchdog_enabled: how a Type=notify service tells systemd it is ready, what it is doing,
// that it is stopping, and that its work loop is alive (sd_notify(3), sd_watchdog_enabled(3)).
#include <systemd/sd-daemon.h>

#endif
