import AgentHTTP
import CoreMetrics
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif
import HTTPTypes
import NIOPosix

/// Runs one computer-use action against the desktop through the agent's VNC connection
/// (spec desktop §2): validation and error texts as the reference, coordinates mapped from
/// the declared size to the native one, one action at a time.
struct ActionRunner: Sendable {
    let supervisor: DesktopSupervisor
    let gate = AsyncGate()
    /// `settle_ms` waits at most this long.
    static let maxSettle: Duration = .seconds(10)
    static let defaultHold = 1000

    func run(_ request: DesktopActionRequest) async throws(APIError) -> DesktopActionResponse {
        guard let name = DesktopActionName(rawValue: request.action ?? "") else {
            DesktopMetrics.action("unknown", "client_error").increment()
            throw APIError(.badRequest, "Unknown action: \(request.action ?? "")")
        }
        do {
            let response = try await gate.withGate { () throws(APIError) in try await perform(name, request) }
            DesktopMetrics.action(name.rawValue, "ok").increment()
            return response
        } catch {
            DesktopMetrics.action(name.rawValue, error.status.code >= 500 ? "failed" : "client_error").increment()
            throw error
        }
    }

    private func perform(_ name: DesktopActionName, _ request: DesktopActionRequest) async throws(APIError) -> DesktopActionResponse {
        // Validation first, as the reference: a missing field is a 400 whatever the desktop does.
        let coordinate = DesktopActionRequest.point(request.coordinate)
        switch name {
        case .mouseMove, .leftClick, .rightClick, .middleClick, .doubleClick, .tripleClick, .scroll:
            guard coordinate != nil else { throw APIError(.badRequest, "Missing \"coordinate\" for \(name.rawValue) action.") }
        case .leftClickDrag:
            guard coordinate != nil, request.startCoordinate != nil else {
                throw APIError(.badRequest, "Missing \"coordinate\" or \"start_coordinate\" for left_click_drag.")
            }
        case .key, .type, .holdKey, .keyDown, .keyUp:
            guard request.text != nil else { throw APIError(.badRequest, "Missing \"text\" for \(name.rawValue) action.") }
        case .screenshot, .cursorPosition, .leftMouseDown, .leftMouseUp:
            break
        }
        var scroll = (dx: 0, dy: 0)
        if name == .scroll {
            let amount = request.scrollAmount ?? 3
            switch request.scrollDirection ?? "down" {
            case "up": scroll.dy = -amount
            case "down": scroll.dy = amount
            case "left": scroll.dx = -amount
            case "right": scroll.dx = amount
            case let other: throw APIError(.badRequest, "Invalid scroll direction: \(other)")
            }
        }

        let client: VNCClient
        do {
            client = try await supervisor.vncClient()
        } catch {
            throw APIError(.internalServerError, name.failureMessage, detail: error.description)
        }
        let native = client.size
        let declared = DisplayGeometry(
            width: (request.scaledWidth ?? 0) > 0 ? request.scaledWidth! : native.width,
            height: (request.scaledHeight ?? 0) > 0 ? request.scaledHeight! : native.height)
        func toNative(_ point: (x: Int, y: Int)) -> (x: Int, y: Int) { declared.map(x: point.x, y: point.y, to: native) }
        func fail(_ error: DesktopError, _ message: String = name.failureMessage) -> APIError {
            APIError(.internalServerError, message, detail: error.description)
        }

        var response = DesktopActionResponse(output: "\(name.rawValue) action performed")
        do {
            switch name {
            case .screenshot:
                return try await screenshot(client, declared: declared, request: request)
            case .cursorPosition:
                let position = native.map(x: client.pointerPosition.x, y: client.pointerPosition.y, to: declared)
                response.output = "x=\(position.x),y=\(position.y)"
            case .mouseMove:
                let point = toNative(coordinate!)
                try client.move(x: point.x, y: point.y)
            case .leftClick, .rightClick, .middleClick, .doubleClick, .tripleClick:
                let point = toNative(coordinate!)
                try client.move(x: point.x, y: point.y)
                let button: Int32 = name == .rightClick ? 4 : name == .middleClick ? 2 : 1
                let clicks = name == .doubleClick ? 2 : name == .tripleClick ? 3 : 1
                for _ in 0..<clicks {
                    try client.button(button, down: true)
                    try client.button(button, down: false)
                }
            case .leftClickDrag:
                let start = toNative(DesktopActionRequest.point(request.startCoordinate)!)
                let end = toNative(coordinate!)
                try client.move(x: start.x, y: start.y)
                try client.button(1, down: true)
                try client.move(x: end.x, y: end.y)
                try client.button(1, down: false)
            case .leftMouseDown:
                try client.button(1, down: true)
            case .leftMouseUp:
                try client.button(1, down: false)
            case .scroll:
                let point = toNative(coordinate!)
                try client.move(x: point.x, y: point.y)
                for _ in 0..<abs(scroll.dy) { try click(client, scroll.dy < 0 ? 8 : 16) }
                for _ in 0..<abs(scroll.dx) { try click(client, scroll.dx < 0 ? 32 : 64) }
            case .key:
                let keys = try keysyms(request.text!)
                for key in keys { try client.key(key, down: true) }
                for key in keys.reversed() { try client.key(key, down: false) }
            case .keyDown:
                for key in try keysyms(request.text!) { try client.key(key, down: true) }
            case .keyUp:
                for key in try keysyms(request.text!).reversed() { try client.key(key, down: false) }
            case .type:
                for scalar in request.text!.unicodeScalars {
                    let key = KeyNames.keysym(for: scalar)
                    try client.key(key, down: true)
                    try client.key(key, down: false)
                }
            case .holdKey:
                let keys = try keysyms(request.text!)
                for key in keys { try client.key(key, down: true) }
                // Released however the wait ends (a client that goes away cancels it).
                try? await Task.sleep(for: .milliseconds(max(0, request.duration ?? Self.defaultHold)))
                do {
                    for key in keys.reversed() { try client.key(key, down: false) }
                } catch {
                    throw fail(error, "Key up failed.")
                }
            }
        } catch let error as DesktopError {
            throw fail(error)
        } catch let error as APIError {
            throw error
        } catch {
            throw APIError(.internalServerError, name.failureMessage, detail: "\(error)")
        }
        if let settle = request.settleMs, settle > 0 {
            let waited = await client.settle(quiet: .milliseconds(settle), timeout: Self.maxSettle)
            response.settleWaitedMs = Self.milliseconds(waited)
        }
        return response
    }

    /// Whole milliseconds of `duration` (for `settle_waited_ms`).
    static func milliseconds(_ duration: Duration) -> Int {
        Int(duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000)
    }

    private func click(_ client: VNCClient, _ button: Int32) throws(DesktopError) {
        try client.button(button, down: true)
        try client.button(button, down: false)
    }

    /// The keysyms of a `+` combination, normalized as portabledesktop does.
    private func keysyms(_ text: String) throws(DesktopError) -> [UInt32] {
        var keys: [UInt32] = []
        for part in KeyNames.normalize(combination: text).split(separator: "+", omittingEmptySubsequences: false) {
            guard let key = KeyNames.keysym(String(part)) else { throw DesktopError("unknown key name: \(part)") }
            keys.append(key)
        }
        return keys
    }

    /// The screen (or `region` of it at native resolution) as a base64 PNG.
    private func screenshot(_ client: VNCClient, declared: DisplayGeometry, request: DesktopActionRequest) async throws(APIError)
        -> DesktopActionResponse
    {
        var waited: Duration?
        if let settle = request.settleMs, settle > 0 {
            waited = await client.settle(quiet: .milliseconds(settle), timeout: Self.maxSettle)
        }
        let frame: (pixels: [UInt8], size: DisplayGeometry)
        do {
            frame = try client.capture()
        } catch {
            throw APIError(.internalServerError, "Screenshot failed.", detail: error.description)
        }
        var target = declared
        var crop: (x: Int, y: Int, width: Int, height: Int)?
        if let region = request.region {
            guard region.count == 4, region[2] > 0, region[3] > 0 else {
                throw APIError(.badRequest, "Invalid \"region\" for screenshot action.", detail: "region is [x, y, width, height] with a positive size.")
            }
            let native = frame.size
            let x0 = DisplayGeometry.map(region[0], from: declared.width, to: native.width)
            let y0 = DisplayGeometry.map(region[1], from: declared.height, to: native.height)
            let x1 = DisplayGeometry.map(region[0] + region[2] - 1, from: declared.width, to: native.width)
            let y1 = DisplayGeometry.map(region[1] + region[3] - 1, from: declared.height, to: native.height)
            crop = (x0, y0, max(1, x1 - x0 + 1), max(1, y1 - y0 + 1))
            target = DisplayGeometry(width: crop!.width, height: crop!.height)
        }
        let chosenCrop = crop
        let size = target
        let encoded = try? await NIOThreadPool.singleton.runIfActive { () -> [UInt8]? in
            var pixels = frame.pixels
            if let chosenCrop {
                pixels = PixelScaler.crop(pixels, size: frame.size, x: chosenCrop.x, y: chosenCrop.y, width: chosenCrop.width, height: chosenCrop.height)
            } else {
                pixels = PixelScaler.resize(pixels, from: frame.size, to: size)
            }
            return try? PNGEncoder.encode(rgbx: pixels, width: size.width, height: size.height)
        }
        guard let png = encoded ?? nil else { throw APIError(.internalServerError, "Screenshot failed.", detail: "PNG encoding failed") }
        var response = DesktopActionResponse(
            output: "screenshot", screenshotData: Data(png).base64EncodedString(), screenshotWidth: size.width, screenshotHeight: size.height)
        if let waited { response.settleWaitedMs = Self.milliseconds(waited) }
        return response
    }
}
