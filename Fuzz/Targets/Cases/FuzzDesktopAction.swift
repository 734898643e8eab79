import AgentHTTP
import Desktop

/// `POST /desktop/action` bodies on a desktop whose size comes from the input: a decoded
/// action's numbers are within the desktop's limits, its points land on the screen, a
/// screenshot region's crop lies inside it; key names normalize stably; the declared-size
/// mapping stays on the screen for any coordinate.
public func fuzzDesktopAction(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    var input = FuzzInput(data, size)
    // RFB framebuffer sizes are 16-bit.
    let native = DisplayGeometry(width: input.int(in: 1...65535), height: input.int(in: 1...65535))
    let x = Int(truncatingIfNeeded: input.uint(8))
    let from = input.int(in: 1...65535)
    let mapped = DisplayGeometry.map(x, from: from, to: native.width)
    require((0..<native.width).contains(mapped), "map put \(x) at \(mapped), outside 0..<\(native.width)")
    let recommended = DisplayGeometry.recommended(forNative: native)
    require(recommended.width >= 1 && recommended.height >= 1, "a recommended side below 1")
    require(recommended.width <= native.width && recommended.height <= native.height, "recommended larger than native")

    guard let facts = try? DesktopActionFuzzing.facts(json: input.rest(), native: native) else { return 0 }
    func onScreen(_ point: (x: Int, y: Int)?) -> Bool {
        guard let point else { return true }
        return (0..<native.width).contains(point.x) && (0..<native.height).contains(point.y)
    }
    require(onScreen(facts.coordinate) && onScreen(facts.startCoordinate), "a point off the screen")
    if let crop = facts.crop {
        require(crop.x >= 0 && crop.y >= 0 && crop.width >= 1 && crop.height >= 1, "an empty or negative crop")
        require(crop.x + crop.width <= native.width && crop.y + crop.height <= native.height, "a crop beyond the screen")
    }
    require(
        facts.scroll.dx.magnitude <= UInt(DesktopLimits.maxScrollAmount) && facts.scroll.dy.magnitude <= UInt(DesktopLimits.maxScrollAmount),
        "a scroll beyond its bound")
    require(facts.hold >= .zero && facts.hold <= .milliseconds(DesktopLimits.maxHoldMilliseconds), "a hold beyond its bound")
    if let settle = facts.settle { require(settle > .zero && settle <= .milliseconds(DesktopLimits.maxSettleMilliseconds), "a settle beyond its bound") }
    let declared = facts.declared
    require(declared.width >= 1 && declared.height >= 1, "a declared side below 1")
    require(
        (declared.width <= DesktopLimits.maxSide || declared.width == native.width)
            && (declared.height <= DesktopLimits.maxSide || declared.height == native.height), "a declared side beyond its bound")
    if let text = facts.text {
        let normalized = KeyNames.normalize(combination: text)
        require(KeyNames.normalize(combination: normalized) == normalized, "key names do not normalize stably")
        for scalar in text.unicodeScalars.prefix(64) { _ = KeyNames.keysym(for: scalar) }
    }
    return 0
}
