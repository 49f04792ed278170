// fuzz-seeds: regions
// fuzz-max-len: 1048576

import Foundation
import GeofenceCore

/// Regions files into `RegionJSON.decodeFile`: it either returns valid regions, each of which
/// exports (`RegionJSON.encode`) to a definition that imports again as an equal region, or fails
/// with at least one problem line. Never a trap, never a hang.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRegionJSON(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = Array(fuzzInput(data, size))
    // A whole millisecond, as a timestamp written in a file can be.
    let now = Date(timeIntervalSince1970: 1_796_000_000.125)
    switch RegionJSON.decodeFile(bytes, now: now, createdBy: 1000) {
    case .failure(let error):
        require(!error.problems.isEmpty, "a failure without a problem")
        for problem in error.problems {
            require(!problem.isEmpty, "an empty problem line in \(error.problems)")
        }
    case .success(let regions):
        require(Set(regions.map(\.id)).count == regions.count, "two regions with one id")
        var exported: [JSONValue] = []
        for region in regions {
            let definition = RegionJSON.encode(region)
            exported.append(.object(definition))
            do throws(RegionValidationError) {
                let again = try RegionJSON.decode(.object(definition), now: now, createdBy: 1000)
                require(again == region, "export then import changed \(region) into \(again)")
            } catch {
                fatalError("export of \(region) does not import: \(error); it was \(definition)")
            }
        }
        // The same through text, as `export` then `import` run it.
        let file = JSONValue.object(["regions": .array(exported)]).serialized(pretty: true)
        switch RegionJSON.decodeFile(Array(file.utf8), now: now, createdBy: 1000) {
        case .success(let again):
            require(again == regions, "the exported file imports as different regions: \(file)")
        case .failure(let error):
            fatalError("the exported file does not import: \(error)\n\(file)")
        }
    }
    return 0
}
