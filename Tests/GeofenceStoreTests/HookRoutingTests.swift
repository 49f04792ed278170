import Foundation
import GeofenceStore
import Testing

@Suite("hook routing")
struct HookRoutingTests {
    let t = Date(timeIntervalSince1970: 1_800_000_000)
    var globals: [GlobalHook] {
        [
            GlobalHook(id: "all", events: [], command: "log-all", createdBy: 1001, createdAt: t),
            GlobalHook(id: "exits", events: ["exit"], command: "page-ops", createdBy: 0, createdAt: t),
            GlobalHook(id: "source", events: ["source", "device"], command: "watch-gps", createdAt: t),
        ]
    }
    let depot = HookRouting.RegionHooks(
        name: "Depot", hooks: #"{"enter":"open-gate","exit":"close-gate"}"#, createdBy: 1002)

    @Test("a region event goes to its region's hook for its type, then to the global hooks for its type")
    func regionEvents() {
        let routing = HookRouting(globals: globals, runAsCreators: false)
        let enter = routing.routes(eventType: "enter", region: "depot", regionHooks: depot)
        #expect(enter.map(\.hook) == ["region", "hook:all"])
        #expect(enter.map(\.command) == ["open-gate", "log-all"])
        #expect(enter.allSatisfy { $0.regionName == "Depot" && $0.runAs == nil })
        #expect(enter.map(\.orderKey.storeValue) == ["region|region:depot", "hook:all|region:depot"])
        let exit = routing.routes(eventType: "exit", region: "depot", regionHooks: depot)
        #expect(exit.map(\.hook) == ["region", "hook:all", "hook:exits"])
        // A region hook only for the types a region can notify; none without one for the type.
        #expect(routing.routes(eventType: "dwell", region: "depot", regionHooks: depot).map(\.hook) == ["hook:all"])
        let determined = HookRouting.RegionHooks(name: nil, hooks: #"{"determined":"x"}"#, createdBy: nil)
        let first = routing.routes(eventType: "determined", region: "depot", regionHooks: determined)
        #expect(first.map(\.hook) == ["hook:all"])
        let broken = HookRouting.RegionHooks(name: "B", hooks: "{not json", createdBy: nil)
        #expect(routing.routes(eventType: "enter", region: "b", regionHooks: broken).map(\.hook) == ["hook:all"])
    }

    @Test("a region removed since its event leaves the global hooks, without a name")
    func regionGone() {
        let routes = HookRouting(globals: globals, runAsCreators: false)
            .routes(eventType: "exit", region: "gone", regionHooks: nil)
        #expect(routes.map(\.hook) == ["hook:all", "hook:exits"])
        #expect(routes.allSatisfy { $0.regionName == nil && $0.orderKey.scope == .region("gone") })
    }

    @Test("a state event goes to the global hooks for its type, ordered per type")
    func stateEvents() {
        let routes = HookRouting(globals: globals, runAsCreators: false)
            .routes(eventType: "source", region: nil, regionHooks: nil)
        #expect(routes.map(\.hook) == ["hook:all", "hook:source"])
        #expect(routes.map(\.orderKey.storeValue) == ["hook:all|type:source", "hook:source|type:source"])
        let status = HookRouting(globals: globals, runAsCreators: false)
            .routes(eventType: "region-status", region: "depot", regionHooks: depot)
        #expect(status.map(\.orderKey.scope) == [.eventType("region-status")])
        let none = HookRouting(globals: [], runAsCreators: true)
        #expect(none.routes(eventType: "enter", region: nil, regionHooks: nil).isEmpty)
    }

    @Test("run as the hook's creator only when asked, and never as root or an unknown user")
    func runAs() {
        let routing = HookRouting(globals: globals, runAsCreators: true)
        let exit = routing.routes(eventType: "exit", region: "depot", regionHooks: depot)
        #expect(exit.map(\.runAs) == [1002, 1001, nil])
        #expect(routing.routes(eventType: "device", region: nil, regionHooks: nil).map(\.runAs) == [1001, nil])
    }
}
