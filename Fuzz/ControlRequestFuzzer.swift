// fuzz-seeds: control
// fuzz-max-len: 1048576
// fuzz-sources: Sources/GeofenceEngine/Control/ControlRequest.swift

import GeofenceCore

/// Control-socket lines into `ControlRequest.parse` (and `ControlResponse.parse`, which the CLI runs
/// on the daemon's answers): a request either parses and its own `line` parses back to an equal
/// request, or it fails with a client error. Compiled in one module with ControlRequest.swift,
/// which is pure, so the harness needs nothing else from GeofenceEngine.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzControlRequest(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let line = fuzzInput(data, size)
    switch ControlRequest.parse(line) {
    case .success(let request):
        switch ControlRequest.parse(Array(request.line.utf8)) {
        case .success(let again):
            require(again == request, "\(request.line) reads back as \(again.line)")
        case .failure(let error):
            fatalError("the request's own line \(request.line) does not parse: \(error)")
        }
    case .failure(let error):
        let clientErrors: [ControlError.Code] = [.badRequest, .unknownMethod, .tooLong]
        require(clientErrors.contains(error.code), "a parse failure with code \(error.code)")
        require(!error.message.isEmpty, "a parse failure without a message")
    }
    if let response = ControlResponse.parse(line) {
        require(ControlResponse.parse(Array(response.line.utf8)) == response, "response changed: \(response.line)")
    }
    return 0
}
