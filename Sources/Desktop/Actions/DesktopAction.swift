import AgentCore
import AgentHTTP
import FoundationEssentials
import HTTPTypes

/// `POST /api/v0/desktop/action`'s body, plus two additions: `region`
/// for a screenshot of part of the screen at native resolution, and `settle_ms` to wait for
/// the screen to stop changing after acting.
struct DesktopActionRequest: Sendable {
    var action: String?
    var coordinate: [Int]?
    var startCoordinate: [Int]?
    var text: String?
    var duration: Int?
    var scrollAmount: Int?
    var scrollDirection: String?
    var scaledWidth: Int?
    var scaledHeight: Int?
    /// `[x, y, width, height]` in declared coordinates.
    var region: [Int]?
    var settleMs: Int?

    /// The point as Go decodes `*[2]int`: missing elements are 0, extra ones ignored.
    static func point(_ values: [Int]?) -> (x: Int, y: Int)? {
        guard let values else { return nil }
        return (values.count > 0 ? values[0] : 0, values.count > 1 ? values[1] : 0)
    }
}

/// What a client may ask of the desktop. Every number in an action body is checked
/// against these before any arithmetic on it, so none can trap, size an allocation or hold
/// the desktop beyond them; past a bound the answer is 400 with the bound in `detail`.
/// Coordinates need no bound: any `Int` is clamped to the screen, as the reference does.
public enum DesktopLimits {
    /// Longest side of a declared size (`scaled_width`, `scaled_height`) and of a screenshot.
    public static let maxSide = 8192
    /// Most pixels in a declared size and a screenshot: 7680×4320 (8K UHD), 33 177 600. A
    /// screenshot that large is scaled and encoded in RGBX (127 MiB), filtered rows (95 MiB)
    /// and zlib's bound (95 MiB), then PNG and base64: measured +0.31 GiB at the peak for a
    /// plain desktop, about 0.45 GiB at most for an image that does not compress. Actions
    /// run one at a time, so there is one such screenshot at most. (16000×16000 took 2.5 GiB
    /// before this bound.)
    public static let maxPixels = 7680 * 4320
    /// `hold_key`'s `duration` (ms; default 1000; negative holds 0, as the reference).
    public static let maxHoldMilliseconds = 60_000
    /// `settle_ms` (≤ 0: no settling).
    public static let maxSettleMilliseconds = 10_000
    /// `scroll_amount`, wheel clicks either way (a negative amount scrolls the other way,
    /// as the reference).
    public static let maxScrollAmount = 1_000

    /// Whether an image of `width × height` is within ``maxSide`` and ``maxPixels``.
    public static func allowsImage(width: Int, height: Int) -> Bool {
        (1...maxSide).contains(width) && (1...maxSide).contains(height) && width * height <= maxPixels
    }
}

/// A decoded and checked `/action` body: the action is known, the fields it needs are there,
/// and every number is within ``DesktopLimits``. What is left to do needs the desktop.
public struct DesktopAction: Sendable {
    /// The action's name as the request gave it (`left_click`, ...).
    public var name: String { kind.rawValue }
    let kind: DesktopActionName
    let request: DesktopActionRequest
    let coordinate: (x: Int, y: Int)?
    let startCoordinate: (x: Int, y: Int)?
    /// Wheel clicks: negative up or left.
    let scroll: (dx: Int, dy: Int)
    let hold: Duration
    let settle: Duration?
    /// The declared size asked for, per side (nil: that side is native).
    let scaledWidth: Int?
    let scaledHeight: Int?
    /// A screenshot region in declared coordinates: its first and last columns and rows
    /// (the last saturates at `Int.max`, never overflows).
    let region: (x0: Int, y0: Int, x1: Int, y1: Int)?

    /// Decodes an `/action` body and checks it: the entry point for anything that wants to
    /// know what the agent makes of some bytes (a fuzzer). Pure: no desktop, no I/O; never
    /// traps. Throws the answer the route gives: 400 `Failed to decode request body.`,
    /// `Unknown action: …`, `Missing "…" for … action.`, `Invalid …`.
    public static func decode(json bytes: [UInt8]) throws(APIError) -> DesktopAction {
        try validate(decodeRequest(bytes))
    }

    /// The JSON body, not yet checked: 400 `Failed to decode request body.`, the detail in
    /// Go's words naming the field (`json: cannot unmarshal string into Go struct field
    /// DesktopAction.coordinate of type []int`).
    static func decodeRequest(_ bytes: [UInt8]) throws(APIError) -> DesktopActionRequest {
        do {
            let body = try JSONRequest.parse(bytes, typeName: "DesktopAction")
            return DesktopActionRequest(
                action: try body.string("action"), coordinate: try body.intArray("coordinate"),
                startCoordinate: try body.intArray("start_coordinate"), text: try body.string("text"),
                duration: try body.int("duration"), scrollAmount: try body.int("scroll_amount"),
                scrollDirection: try body.string("scroll_direction"), scaledWidth: try body.int("scaled_width"),
                scaledHeight: try body.int("scaled_height"), region: try body.intArray("region"), settleMs: try body.int("settle_ms"))
        } catch {
            throw APIError(.badRequest, "Failed to decode request body.", detail: error.body.detail)
        }
    }

    /// The checks, in the reference's order (name, then the fields the action needs, then the
    /// scroll direction), then the bounds, which the reference does not have.
    static func validate(_ request: DesktopActionRequest) throws(APIError) -> DesktopAction {
        guard let kind = DesktopActionName(rawValue: request.action ?? "") else {
            throw APIError(.badRequest, "Unknown action: \(request.action ?? "")")
        }
        let coordinate = DesktopActionRequest.point(request.coordinate)
        let start = DesktopActionRequest.point(request.startCoordinate)
        switch kind {
        case .mouseMove, .leftClick, .rightClick, .middleClick, .doubleClick, .tripleClick, .scroll:
            guard coordinate != nil else { throw APIError(.badRequest, "Missing \"coordinate\" for \(kind.rawValue) action.") }
        case .leftClickDrag:
            guard coordinate != nil, start != nil else {
                throw APIError(.badRequest, "Missing \"coordinate\" or \"start_coordinate\" for left_click_drag.")
            }
        case .key, .type, .holdKey, .keyDown, .keyUp:
            guard request.text != nil else { throw APIError(.badRequest, "Missing \"text\" for \(kind.rawValue) action.") }
        case .screenshot, .cursorPosition, .leftMouseDown, .leftMouseUp:
            break
        }
        var scroll = (dx: 0, dy: 0)
        if kind == .scroll {
            let amount = request.scrollAmount ?? 3
            let direction = request.scrollDirection ?? "down"
            guard ["up", "down", "left", "right"].contains(direction) else {
                throw APIError(.badRequest, "Invalid scroll direction: \(direction)")
            }
            guard (-DesktopLimits.maxScrollAmount...DesktopLimits.maxScrollAmount).contains(amount) else {
                throw APIError(
                    .badRequest, "Invalid \"scroll_amount\" for scroll action.",
                    detail: "scroll_amount is at most \(DesktopLimits.maxScrollAmount) wheel clicks either way.")
            }
            switch direction {
            case "up": scroll.dy = -amount
            case "down": scroll.dy = amount
            case "left": scroll.dx = -amount
            default: scroll.dx = amount
            }
        }

        // The declared size: a side ≤ 0 (or absent) is native.
        let scaledWidth = request.scaledWidth.flatMap { $0 > 0 ? $0 : nil }
        let scaledHeight = request.scaledHeight.flatMap { $0 > 0 ? $0 : nil }
        let sidesFit = (scaledWidth ?? 1) <= DesktopLimits.maxSide && (scaledHeight ?? 1) <= DesktopLimits.maxSide
        guard sidesFit, (scaledWidth ?? 1) * (scaledHeight ?? 1) <= DesktopLimits.maxPixels else {
            throw APIError(
                .badRequest, "Invalid \"scaled_width\" or \"scaled_height\".",
                detail: "A declared size is at most \(DesktopLimits.maxSide) pixels a side and \(DesktopLimits.maxPixels) pixels in all (7680x4320).")
        }

        var hold = Duration.zero
        if kind == .holdKey {
            let milliseconds = request.duration ?? ActionRunner.defaultHold
            guard milliseconds <= DesktopLimits.maxHoldMilliseconds else {
                throw APIError(
                    .badRequest, "Invalid \"duration\" for hold_key action.",
                    detail: "duration is in milliseconds, at most \(DesktopLimits.maxHoldMilliseconds).")
            }
            hold = .milliseconds(max(0, milliseconds))
        }

        var settle: Duration?
        if let milliseconds = request.settleMs {
            guard milliseconds <= DesktopLimits.maxSettleMilliseconds else {
                throw APIError(
                    .badRequest, "Invalid \"settle_ms\".", detail: "settle_ms is at most \(DesktopLimits.maxSettleMilliseconds).")
            }
            if milliseconds > 0 { settle = .milliseconds(milliseconds) }
        }

        var region: (x0: Int, y0: Int, x1: Int, y1: Int)?
        if kind == .screenshot, let values = request.region {
            guard values.count == 4, values[2] > 0, values[3] > 0 else {
                throw APIError(
                    .badRequest, "Invalid \"region\" for screenshot action.", detail: "region is [x, y, width, height] with a positive size.")
            }
            // The last column and row; `width - 1` cannot overflow (width > 0), the sum can.
            func last(_ first: Int, _ length: Int) -> Int {
                let (sum, overflow) = first.addingReportingOverflow(length - 1)
                return overflow ? Int.max : sum
            }
            region = (values[0], values[1], last(values[0], values[2]), last(values[1], values[3]))
        }

        return DesktopAction(
            kind: kind, request: request, coordinate: coordinate, startCoordinate: start, scroll: scroll, hold: hold,
            settle: settle, scaledWidth: scaledWidth, scaledHeight: scaledHeight, region: region)
    }

    /// The declared size for a desktop of `native` size.
    func declared(native: DisplayGeometry) -> DisplayGeometry {
        DisplayGeometry(width: scaledWidth ?? native.width, height: scaledHeight ?? native.height)
    }

    /// `region` in native pixels for a desktop of `native` size; nil when the region
    /// reaches beyond the declared screen (the screenshot answers 400 then, never a crop
    /// clamped to the edge).
    func regionCrop(native: DisplayGeometry) -> (x: Int, y: Int, width: Int, height: Int)? {
        guard let region else { return nil }
        let declared = declared(native: native)
        guard region.x0 >= 0, region.y0 >= 0, region.x1 < declared.width, region.y1 < declared.height else { return nil }
        // Inside the declared screen, so each end maps inside the native one.
        let x0 = DisplayGeometry.map(region.x0, from: declared.width, to: native.width)
        let y0 = DisplayGeometry.map(region.y0, from: declared.height, to: native.height)
        let x1 = DisplayGeometry.map(region.x1, from: declared.width, to: native.width)
        let y1 = DisplayGeometry.map(region.y1, from: declared.height, to: native.height)
        return (x0, y0, max(1, x1 - x0 + 1), max(1, y1 - y0 + 1))
    }
}

/// The answer; empty fields are left out.
struct DesktopActionResponse: Encodable, Sendable {
    var output: String?
    var screenshotData: String?
    var screenshotWidth: Int?
    var screenshotHeight: Int?
    /// How long `settle_ms` waited, when it was asked for.
    var settleWaitedMs: Int?

    enum CodingKeys: String, CodingKey {
        case output, screenshotData = "screenshot_data", screenshotWidth = "screenshot_width"
        case screenshotHeight = "screenshot_height", settleWaitedMs = "settle_waited_ms"
    }
}

/// The actions and what the reference answers when one fails (HTTP 500).
enum DesktopActionName: String, CaseIterable, Sendable {
    case screenshot, key, type
    case keyDown = "key_down", keyUp = "key_up"
    case cursorPosition = "cursor_position", mouseMove = "mouse_move"
    case leftClick = "left_click", rightClick = "right_click", middleClick = "middle_click"
    case doubleClick = "double_click", tripleClick = "triple_click", leftClickDrag = "left_click_drag"
    case leftMouseDown = "left_mouse_down", leftMouseUp = "left_mouse_up", scroll
    case holdKey = "hold_key"

    var failureMessage: String {
        switch self {
        case .screenshot: "Screenshot failed."
        case .key: "Key press failed."
        case .type: "Type action failed."
        case .keyDown, .holdKey: "Key down failed."
        case .keyUp: "Key up failed."
        case .cursorPosition: "Cursor position failed."
        case .mouseMove: "Mouse move failed."
        case .leftClick: "Left click failed."
        case .rightClick: "Right click failed."
        case .middleClick: "Middle click failed."
        case .doubleClick: "Double click failed."
        case .tripleClick: "Triple click failed."
        case .leftClickDrag: "Left click drag failed."
        case .leftMouseDown: "Left mouse down failed."
        case .leftMouseUp: "Left mouse up failed."
        case .scroll: "Scroll failed."
        }
    }
}
