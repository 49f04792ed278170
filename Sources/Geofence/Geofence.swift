// geofence as a library: everything an embedder needs, and nothing else.
//
// `import Geofence` gives the names below and only those: the engine's modules (GeofenceCore, GeofenceStore,
// GeofenceEngine, GeofenceGPSD) stay implementation. Docs/library.md is the guide.

import GeofenceCore
import GeofenceEngine
import GeofenceGPSD

// MARK: The monitor

/// The engine, embedded: regions, a source, committed events as an async sequence (`GeofenceEngine.GeofenceMonitor`).
public typealias GeofenceMonitor = GeofenceEngine.GeofenceMonitor
/// A committed event, typed, `Codable` as its JSON (exactly what hooks and `geofence watch` see).
public typealias GeofenceEvent = GeofenceEngine.GeofenceEvent
/// A state event's kind (`source`, `device`, `services`, `authorization`, `region-status`).
public typealias StateEventKind = GeofenceEngine.StateEventKind
/// A vehicle's state in a region: `unknown`, `inside`, `outside` (`GeofenceMonitor.state(of:subject:)`).
public typealias RegionState = GeofenceCore.RegionState
/// The fix a region event carries.
public typealias EventFix = GeofenceCore.EventFix
/// The four questions, answered for a monitor's source.
public typealias MonitorStatus = GeofenceEngine.MonitorStatus
/// The wall and monotonic clocks the engine reads; `SystemClock` is the system's.
public typealias GeofenceClock = GeofenceCore.GeofenceClock
/// The system's clocks: `Date()` for the wall, `CLOCK_MONOTONIC` for the monotonic.
public typealias SystemClock = GeofenceEngine.SystemClock
/// Where the engine's log lines go.
public typealias Logger = GeofenceEngine.Logger
/// How much the engine logs: `error`, `warning`, `notice`, `info`, `debug`.
public typealias LogLevel = GeofenceEngine.LogLevel

// MARK: Regions and fixes

/// A region, a circle or a polygon: validated on construction.
public typealias Region = GeofenceCore.Region
/// A polygon's shape (GeoJSON `Polygon` or `MultiPolygon` rings, geodesic edges), validated on construction.
public typealias RegionPolygon = GeofenceCore.RegionPolygon
/// Why a region was refused: the field and what is wrong with it.
public typealias RegionValidationError = GeofenceCore.RegionValidationError
/// The events a region can ask for besides `determined` and `expired`: `enter`, `exit`, `dwell`.
public typealias NotifyKind = GeofenceCore.NotifyKind
/// A WGS84 latitude and longitude, degrees.
public typealias Coordinate = GeofenceCore.Coordinate
/// One position report, as a source read it.
public typealias Fix = GeofenceCore.Fix
/// A fix's dimension: no fix, 2D or 3D.
public typealias FixMode = GeofenceCore.FixMode
/// How fixes are judged (`Configuration.filter`, `Configuration.monitor`).
public typealias FixFilterConfiguration = GeofenceCore.FixFilterConfiguration
/// The decision rule's settings (`Configuration.monitor`): the hysteresis band, the outlier test, gaps, the vicinity.
public typealias MonitorConfiguration = GeofenceCore.MonitorConfiguration
/// A region event's kind: `enter`, `exit`, `dwell`, `determined`, `expired`.
public typealias RegionEventType = GeofenceCore.RegionEventType
/// A user's authorization, as `geofence permission` records it: `authorized`, `denied`, `restricted`, `notDetermined`.
public typealias AuthorizationStatus = GeofenceCore.AuthorizationStatus
/// What a gpsd source knows of its receivers (devices, their drivers and cycles).
public typealias CapabilitySnapshot = GeofenceCore.CapabilitySnapshot

// MARK: Sources

/// Where fixes come from: conform to it for a source of your own.
public typealias LocationSource = GeofenceEngine.LocationSource
/// A source's reports, with back-pressure by watermarks.
public typealias LocationReports = GeofenceEngine.LocationReports
/// One thing a source has to say.
public typealias LocationReport = GeofenceCore.LocationReport
/// A source's report that it lost its input, why, and when it tries again.
public typealias SourceDown = GeofenceCore.SourceDown
/// The liveness watchdog a source runs: `silent` before the first fix, `lost` when fixes stop, `restored`.
public typealias SourceLiveness = GeofenceCore.SourceLiveness
/// A fleet source's own account of itself.
public typealias SourceStatus = GeofenceEngine.SourceStatus
/// gpsd-style TPV JSON lines from a file, a FIFO or standard input.
public typealias JSONLineSource = GeofenceEngine.JSONLineSource
/// gpsd, through libgps: `GPSDLocationSource(configuration: .init(address: GPSDAddress(...)))`.
public typealias GPSDLocationSource = GeofenceEngine.GPSDLocationSource
/// A gpsd source's settings: its address, liveness, reconnection backoff.
public typealias GPSDConfiguration = GeofenceGPSD.GPSDSource.Configuration
/// Where gpsd listens, and which device to watch: `GPSDAddress(host: "localhost", port: 2947)`.
public typealias GPSDAddress = GeofenceCore.GPSDAddress
/// Exponential backoff with jitter, for every retry a source makes.
public typealias ReconnectBackoff = GeofenceCore.ReconnectBackoff
/// Why a source cannot start (a file that is not there, a broker that refuses).
public typealias SourceOpenError = GeofenceEngine.SourceOpenError
/// Why an MQTT source could not connect or subscribe.
public typealias MQTTError = GeofenceEngine.MQTTError
/// An MQTT subscription (QoS 1, persistent session).
public typealias MQTTSource = GeofenceEngine.MQTTSource
/// An MQTT broker and topic filter: `try MQTTAddress(parsing: "mqtt://broker/fleet/#")`.
public typealias MQTTAddress = GeofenceEngine.MQTTAddress
/// How an MQTT source names each message's vehicle: from the payload, the topic, or one topic level.
public typealias MQTTVehicleNaming = GeofenceEngine.MQTTVehicleNaming
/// Reports given by the program itself: for tests, simulators, fixes from elsewhere.
public typealias ScriptedSource = GeofenceEngine.ScriptedSource
