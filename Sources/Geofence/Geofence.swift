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
public typealias SystemClock = GeofenceEngine.SystemClock
/// Where the engine's log lines go.
public typealias Logger = GeofenceEngine.Logger
public typealias LogLevel = GeofenceEngine.LogLevel

// MARK: Regions and fixes

/// A region, a circle or a polygon: validated on construction.
public typealias Region = GeofenceCore.Region
/// A polygon's shape (GeoJSON `Polygon` or `MultiPolygon` rings, geodesic edges), validated on construction.
public typealias RegionPolygon = GeofenceCore.RegionPolygon
public typealias RegionValidationError = GeofenceCore.RegionValidationError
public typealias NotifyKind = GeofenceCore.NotifyKind
/// A WGS84 latitude and longitude, degrees.
public typealias Coordinate = GeofenceCore.Coordinate
/// One position report, as a source read it.
public typealias Fix = GeofenceCore.Fix
public typealias FixMode = GeofenceCore.FixMode
/// How fixes are judged (`Configuration.filter`, `Configuration.monitor`).
public typealias FixFilterConfiguration = GeofenceCore.FixFilterConfiguration
public typealias MonitorConfiguration = GeofenceCore.MonitorConfiguration
public typealias RegionEventType = GeofenceCore.RegionEventType
public typealias AuthorizationStatus = GeofenceCore.AuthorizationStatus
public typealias CapabilitySnapshot = GeofenceCore.CapabilitySnapshot

// MARK: Sources

/// Where fixes come from: conform to it for a source of your own.
public typealias LocationSource = GeofenceEngine.LocationSource
/// A source's reports, with back-pressure by watermarks.
public typealias LocationReports = GeofenceEngine.LocationReports
/// One thing a source has to say.
public typealias LocationReport = GeofenceCore.LocationReport
public typealias SourceDown = GeofenceCore.SourceDown
public typealias SourceLiveness = GeofenceCore.SourceLiveness
/// A fleet source's own account of itself.
public typealias SourceStatus = GeofenceEngine.SourceStatus
/// gpsd-style TPV JSON lines from a file, a FIFO or standard input.
public typealias JSONLineSource = GeofenceEngine.JSONLineSource
/// gpsd, through libgps: `GPSDLocationSource(configuration: .init(address: GPSDAddress(...)))`.
public typealias GPSDLocationSource = GeofenceEngine.GPSDLocationSource
public typealias GPSDConfiguration = GeofenceGPSD.GPSDSource.Configuration
public typealias GPSDAddress = GeofenceCore.GPSDAddress
public typealias ReconnectBackoff = GeofenceCore.ReconnectBackoff
/// Why a source cannot start (a file that is not there, a broker that refuses).
public typealias SourceOpenError = GeofenceEngine.SourceOpenError
public typealias MQTTError = GeofenceEngine.MQTTError
/// An MQTT subscription (QoS 1, persistent session).
public typealias MQTTSource = GeofenceEngine.MQTTSource
public typealias MQTTAddress = GeofenceEngine.MQTTAddress
/// How an MQTT source names each message's vehicle: from the payload, the topic, or one topic level.
public typealias MQTTVehicleNaming = GeofenceEngine.MQTTVehicleNaming
/// Reports given by the program itself: for tests, simulators, fixes from elsewhere.
public typealias ScriptedSource = GeofenceEngine.ScriptedSource
