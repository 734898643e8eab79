/// `POST /api/v0/desktop/action`'s body (spec desktop §2.1), plus two additions: `region`
/// for a screenshot of part of the screen at native resolution, and `settle_ms` to wait for
/// the screen to stop changing after acting.
struct DesktopActionRequest: Decodable, Sendable {
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

    enum CodingKeys: String, CodingKey {
        case action, coordinate, startCoordinate = "start_coordinate", text, duration
        case scrollAmount = "scroll_amount", scrollDirection = "scroll_direction"
        case scaledWidth = "scaled_width", scaledHeight = "scaled_height", region, settleMs = "settle_ms"
    }

    /// The point as Go decodes `*[2]int`: missing elements are 0, extra ones ignored.
    static func point(_ values: [Int]?) -> (x: Int, y: Int)? {
        guard let values else { return nil }
        return (values.count > 0 ? values[0] : 0, values.count > 1 ? values[1] : 0)
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
