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
    /// `settle_ms` waits at most this long in all (the quiet period it asks for is itself
    /// at most ``DesktopLimits/maxSettleMilliseconds``).
    static let maxSettle: Duration = .milliseconds(DesktopLimits.maxSettleMilliseconds)
    static let defaultHold = 1000

    /// The answer when the client went away while its action waited or ran: nobody reads it
    /// (the reference writes no body then either); nginx's "client closed request".
    static let clientGone = APIError(HTTPResponse.Status(code: 499, reasonPhrase: "Client Closed Request"), "The client went away.")

    /// Runs `action` once the actions before it are done. Cancelling the calling task (its
    /// client went away) takes it out of the queue, or ends it early: a hold releases its
    /// keys at once, typing and scrolling stop between events, settling stops waiting.
    func run(_ action: DesktopAction) async throws(APIError) -> DesktopActionResponse {
        let name = action.kind
        do throws(APIError) {
            guard let response = try await gate.withGate({ () throws(APIError) in try await perform(action) }) else {
                throw Self.clientGone
            }
            DesktopMetrics.action(name.rawValue, "ok").increment()
            return response
        } catch {
            // A client that went away (499) counts as a client error.
            DesktopMetrics.action(name.rawValue, error.status.code >= 500 ? "failed" : "client_error").increment()
            throw error
        }
    }

    private func perform(_ action: DesktopAction) async throws(APIError) -> DesktopActionResponse {
        let name = action.kind
        let request = action.request
        let client: VNCClient
        do {
            client = try await supervisor.vncClient()
        } catch {
            throw APIError(.internalServerError, name.failureMessage, detail: error.description)
        }
        let native = client.size
        let declared = action.declared(native: native)
        func toNative(_ point: (x: Int, y: Int)) -> (x: Int, y: Int) { declared.map(x: point.x, y: point.y, to: native) }
        func fail(_ error: DesktopError, _ message: String = name.failureMessage) -> APIError {
            APIError(.internalServerError, message, detail: error.description)
        }

        var response = DesktopActionResponse(output: "\(name.rawValue) action performed")
        do {
            switch name {
            case .screenshot:
                return try await screenshot(client, declared: declared, action: action)
            case .cursorPosition:
                let position = native.map(x: client.pointerPosition.x, y: client.pointerPosition.y, to: declared)
                response.output = "x=\(position.x),y=\(position.y)"
            case .mouseMove:
                let point = toNative(action.coordinate!)
                try client.move(x: point.x, y: point.y)
            case .leftClick, .rightClick, .middleClick, .doubleClick, .tripleClick:
                let point = toNative(action.coordinate!)
                try client.move(x: point.x, y: point.y)
                let button: Int32 = name == .rightClick ? 4 : name == .middleClick ? 2 : 1
                let clicks = name == .doubleClick ? 2 : name == .tripleClick ? 3 : 1
                for _ in 0..<clicks {
                    try client.button(button, down: true)
                    try client.button(button, down: false)
                }
            case .leftClickDrag:
                let start = toNative(action.startCoordinate!)
                let end = toNative(action.coordinate!)
                try client.move(x: start.x, y: start.y)
                try client.button(1, down: true)
                try client.move(x: end.x, y: end.y)
                try client.button(1, down: false)
            case .leftMouseDown:
                try client.button(1, down: true)
            case .leftMouseUp:
                try client.button(1, down: false)
            case .scroll:
                let point = toNative(action.coordinate!)
                try client.move(x: point.x, y: point.y)
                // Each click is a press and a release: stopping between two leaves nothing held.
                // `magnitude`: the amounts are bounded, but never `abs` a client's number.
                for _ in 0..<action.scroll.dy.magnitude {
                    if Task.isCancelled { break }
                    try click(client, action.scroll.dy < 0 ? 8 : 16)
                }
                for _ in 0..<action.scroll.dx.magnitude {
                    if Task.isCancelled { break }
                    try click(client, action.scroll.dx < 0 ? 32 : 64)
                }
            case .key:
                let keys = try keysyms(request.text!)
                for key in keys { try client.key(key, down: true) }
                for key in keys.reversed() { try client.key(key, down: false) }
            case .keyDown:
                for key in try keysyms(request.text!) { try client.key(key, down: true) }
            case .keyUp:
                for key in try keysyms(request.text!).reversed() { try client.key(key, down: false) }
            case .type:
                // Up to a 1 MiB body of text: stop between characters once the client is gone.
                for (index, scalar) in request.text!.unicodeScalars.enumerated() {
                    if index % 64 == 0 && Task.isCancelled { break }
                    let key = KeyNames.keysym(for: scalar)
                    try client.key(key, down: true)
                    try client.key(key, down: false)
                }
            case .holdKey:
                let keys = try keysyms(request.text!)
                for key in keys { try client.key(key, down: true) }
                // Released however the wait ends: its time is up, or the client went away
                // (the route cancels this task then).
                try? await Task.sleep(for: action.hold)
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
        if Task.isCancelled { throw Self.clientGone }
        if let settle = action.settle {
            let waited = await client.settle(quiet: settle, timeout: Self.maxSettle)
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

    /// The screen (or `region` of it at native resolution) as a base64 PNG, within
    /// ``DesktopLimits`` (400 beyond: only a desktop resized past them gets there, since
    /// the declared size was checked already).
    private func screenshot(_ client: VNCClient, declared: DisplayGeometry, action: DesktopAction) async throws(APIError)
        -> DesktopActionResponse
    {
        var waited: Duration?
        if let settle = action.settle {
            waited = await client.settle(quiet: settle, timeout: Self.maxSettle)
        }
        if Task.isCancelled { throw Self.clientGone }
        let frame: (pixels: [UInt8], size: DisplayGeometry)
        do {
            frame = try client.capture()
        } catch {
            throw APIError(.internalServerError, "Screenshot failed.", detail: error.description)
        }
        var target = declared
        var crop: (x: Int, y: Int, width: Int, height: Int)?
        if let region = action.region {
            // Each end clamped into the screen by the mapping: the crop lies inside it.
            let native = frame.size
            let x0 = DisplayGeometry.map(region.x0, from: declared.width, to: native.width)
            let y0 = DisplayGeometry.map(region.y0, from: declared.height, to: native.height)
            let x1 = DisplayGeometry.map(region.x1, from: declared.width, to: native.width)
            let y1 = DisplayGeometry.map(region.y1, from: declared.height, to: native.height)
            crop = (x0, y0, max(1, x1 - x0 + 1), max(1, y1 - y0 + 1))
            target = DisplayGeometry(width: crop!.width, height: crop!.height)
        }
        guard DesktopLimits.allowsImage(width: target.width, height: target.height) else {
            throw APIError(
                .badRequest, "Screenshot too large.",
                detail: "The screenshot would be \(target.width)x\(target.height); at most \(DesktopLimits.maxSide) pixels a side and \(DesktopLimits.maxPixels) in all: ask for a smaller scaled_width and scaled_height.")
        }
        let chosenCrop = crop
        let size = target
        let encoded = try? await NIOThreadPool.singleton.runIfActive { () -> [UInt8]? in
            let pixels: [UInt8]?
            if let chosenCrop {
                pixels = PixelScaler.crop(frame.pixels, size: frame.size, x: chosenCrop.x, y: chosenCrop.y, width: chosenCrop.width, height: chosenCrop.height)
            } else {
                pixels = PixelScaler.resize(frame.pixels, from: frame.size, to: size)
            }
            guard let pixels else { return nil }
            return try? PNGEncoder.encode(rgbx: pixels, width: size.width, height: size.height)
        }
        guard let png = encoded ?? nil else { throw APIError(.internalServerError, "Screenshot failed.", detail: "PNG encoding failed") }
        var response = DesktopActionResponse(
            output: "screenshot", screenshotData: Data(png).base64EncodedString(), screenshotWidth: size.width, screenshotHeight: size.height)
        if let waited { response.settleWaitedMs = Self.milliseconds(waited) }
        return response
    }
}
