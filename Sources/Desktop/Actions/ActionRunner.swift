import AgentHTTP
import CoreMetrics
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif
import HTTPTypes
import NIOPosix

/// Runs one computer-use action against the desktop through the agent's VNC connection
///: validation and error texts as the reference, coordinates mapped from
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

    /// The answer when ``AsyncGate/maxWaiting`` actions wait already (each may hold up to
    /// 1 MiB of text to type).
    static let busy = APIError(.tooManyRequests, "Too many desktop actions are waiting; try again later.")

    /// Runs `action` once the actions before it are done. Cancelling the calling task (its
    /// client went away) takes it out of the queue, or ends it early: a hold releases its
    /// keys at once, typing and scrolling stop between events, settling stops waiting.
    func run(_ action: DesktopAction) async throws(APIError) -> DesktopActionResponse {
        let name = action.kind
        do throws(APIError) {
            let response: DesktopActionResponse
            switch try await gate.withGate({ () throws(APIError) in try await perform(action) }) {
            case .ran(let answer): response = answer
            case .cancelled: throw Self.clientGone
            case .full: throw Self.busy
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
        let info: DesktopInfo
        let client: VNCClient
        do {
            (info, client) = try await supervisor.session()
        } catch {
            throw APIError(.internalServerError, name.failureMessage, detail: error.description)
        }
        let native = client.size
        let declared = action.declared(native: native)
        if action.scaledWidth != nil || action.scaledHeight != nil { await supervisor.noteDeclared(declared) }
        func toNative(_ point: (x: Int, y: Int)) -> (x: Int, y: Int) { declared.map(x: point.x, y: point.y, to: native) }
        func fail(_ error: DesktopError, _ message: String = name.failureMessage) -> APIError {
            APIError(.internalServerError, message, detail: error.description)
        }

        var response = DesktopActionResponse(output: "\(name.rawValue) action performed")
        do {
            switch name {
            case .screenshot:
                return try await screenshot(client, display: info.display, action: action)
            case .cursorPosition:
                // Where the X server has the pointer (another client may have moved it),
                // mapped from the screen's size then to the declared one.
                let display = info.display
                let pointer = try await XScreenReader.offPool { () throws(DesktopError) in try XScreenReader.pointer(display: display) }
                let position = pointer.screen.map(x: pointer.x, y: pointer.y, to: action.declared(native: pointer.screen))
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
            case .leftMouseDown, .leftMouseUp:
                // RFB button events carry a position: send them where the pointer is now (it
                // may have moved since the agent last put it somewhere), when X says so.
                let display = info.display
                if let pointer = try? await XScreenReader.offPool({ () throws(DesktopError) in try XScreenReader.pointer(display: display) }) {
                    try client.move(x: pointer.x, y: pointer.y)
                }
                try client.button(1, down: name == .leftMouseDown)
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
    ///
    /// Fresh: the pixels are read from the X server (``XScreenReader``) after the call
    /// began, so they show every change the server drew before it, with no more than
    /// ``XScreenReader/timeout`` of silence from the server or a 500 (never an older image).
    private func screenshot(_ client: VNCClient, display: Int, action: DesktopAction) async throws(APIError) -> DesktopActionResponse {
        var waited: Duration?
        if let settle = action.settle {
            waited = await client.settle(quiet: settle, timeout: Self.maxSettle)
        }
        if Task.isCancelled { throw Self.clientGone }
        let outcome = try? await NIOThreadPool.singleton.runIfActive { Self.captureScreenshot(display: display, action: action) }
        guard let outcome else { throw APIError(.internalServerError, "Screenshot failed.", detail: "the agent is shutting down") }
        var response = try outcome.get()
        if let waited { response.settleWaitedMs = Self.milliseconds(waited) }
        return response
    }

    /// Captures, scales and encodes a screenshot (blocking: on the thread pool). The part of
    /// the screen is chosen once the X server told its size: the whole screen, scaled to the
    /// declared size; or `region`, mapped to native pixels and captured alone.
    /// Memory: the captured pixels (4 bytes each, at most ``DesktopLimits/maxSide`` a side),
    /// the scaled copy, and the PNG (the image was checked against ``DesktopLimits`` first).
    static func captureScreenshot(display: Int, action: DesktopAction) -> Result<DesktopActionResponse, APIError> {
        var target = DisplayGeometry(width: 0, height: 0)
        // The declared screen, when `region` reaches beyond it (nothing is captured).
        var regionOutside: DisplayGeometry?
        let image: XScreenReader.Image
        do {
            image = try XScreenReader.capture(display: display) { screen in
                let declared = action.declared(native: screen)
                var rect = XScreenReader.Rect(x: 0, y: 0, width: screen.width, height: screen.height)
                target = declared
                if action.region != nil {
                    guard let crop = action.regionCrop(native: screen) else {
                        regionOutside = declared
                        return nil
                    }
                    rect = XScreenReader.Rect(x: crop.x, y: crop.y, width: crop.width, height: crop.height)
                    target = DisplayGeometry(width: rect.width, height: rect.height)
                }
                return DesktopLimits.allowsImage(width: target.width, height: target.height) ? rect : nil
            }
        } catch {
            return .failure(APIError(.internalServerError, "Screenshot failed.", detail: error.description))
        }
        if let screen = regionOutside {
            let asked = (action.request.region ?? []).map(String.init).joined(separator: ", ")
            return .failure(
                APIError(
                    .badRequest, "Invalid \"region\" for screenshot action.",
                    detail: "The region [\(asked)] reaches beyond the screen, which is \(screen.width)x\(screen.height) in declared coordinates: x and y at least 0, x + width at most \(screen.width), y + height at most \(screen.height)."))
        }
        guard let pixels = image.pixels else {
            return .failure(
                APIError(
                    .badRequest, "Screenshot too large.",
                    detail: "The screenshot would be \(target.width)x\(target.height); at most \(DesktopLimits.maxSide) pixels a side and \(DesktopLimits.maxPixels) in all: ask for a smaller scaled_width and scaled_height."))
        }
        let captured = DisplayGeometry(width: image.rect.width, height: image.rect.height)
        // Scaling makes RGBX; an image kept at its size keeps the X server's channel order.
        let channels = captured == target ? image.channels : .rgbx
        guard let scaled = PixelScaler.resize(pixels, from: captured, to: target, channels: image.channels),
            let png = try? PNGEncoder.encode(pixels: scaled, width: target.width, height: target.height, channels: channels)
        else { return .failure(APIError(.internalServerError, "Screenshot failed.", detail: "PNG encoding failed")) }
        return .success(
            DesktopActionResponse(
                output: "screenshot", screenshotData: Data(png).base64EncodedString(), screenshotWidth: target.width,
                screenshotHeight: target.height))
    }
}
