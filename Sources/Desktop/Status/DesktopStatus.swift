/// `GET /api/v0/desktop`'s answer: whether the desktop runs and, when it does, its X display
/// and size. Absent fields are left out (`{"running":false}` when none runs).
struct DesktopStatus: Encodable, Sendable, Equatable {
    var running: Bool
    /// `":10"`: what X clients put in `DISPLAY` (absent when portabledesktop reported none).
    var display: String?
    /// The screen's native size, as the X server has it now.
    var width: Int?
    var height: Int?
    /// The declared (model-facing) size of the latest action that declared one
    /// (`scaled_width`/`scaled_height`) on this desktop; absent before any.
    var declaredWidth: Int?
    var declaredHeight: Int?

    enum CodingKeys: String, CodingKey {
        case running, display, width, height, declaredWidth = "declared_width", declaredHeight = "declared_height"
    }
}
