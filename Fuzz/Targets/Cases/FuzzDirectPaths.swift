import DERP
import Tailnet

/// The tailnet's UDP socket as an attacker on the path sees it: STUN responses (parsed,
/// re-encoded, parsed the same), and runs of datagrams, disco over DERP, sends, time and the
/// block switch through the direct-path logic, whose invariants the seam checks (WireGuard
/// only from disco-verified sources, bounded tables, nothing sent but disco and STUN to
/// addresses seen).
public func fuzzDirectPaths(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    var input = FuzzInput(data, size)
    let stun = input.data(maxLength: 200)
    if let response = try? STUN.parseResponse(stun) {
        let again = try? STUN.parseResponse(STUN.response(txID: response.txID, mapped: response.mapped))
        require(again == response, "a STUN response does not round-trip")
    }
    _ = DiscoEndpoint(String(decoding: input.data(maxLength: 64), as: UTF8.self))
    var steps: [DirectPathsFuzzing.Step] = []
    // Bounded: at most 64 steps.
    while input.remaining > 0, steps.count < 64 {
        switch input.byte() % 6 {
        case 0: steps.append(.udp(bytes: input.data(maxLength: 255), host: input.byte() % 4, port: UInt16(input.uint(2)), seal: input.bool()))
        case 1: steps.append(.derp(bytes: input.data(maxLength: 255), seal: input.bool()))
        case 2: steps.append(.send)
        case 3: steps.append(.wait(milliseconds: UInt16(input.uint(2))))
        case 4: steps.append(.block(input.bool()))
        default: steps.append(.endpoints((0..<Int(input.byte() % 8)).map { _ in UInt16(input.uint(2)) }))
        }
    }
    if let broken = DirectPathsFuzzing.run(steps) { require(false, broken) }
    return 0
}
