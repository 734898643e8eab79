import CDesktop

/// Key names as models write them, normalized as portabledesktop does for xdotool,
/// then turned into X keysyms for the VNC key events.
public enum KeyNames {
    private static let aliases: [String: String] = [
        "ctrl": "ctrl", "control": "ctrl", "alt": "alt", "shift": "shift",
        "super": "super", "meta": "super", "command": "super", "cmd": "super",
        "return": "Return", "enter": "Return", "backspace": "BackSpace", "tab": "Tab",
        "escape": "Escape", "esc": "Escape", "space": "space", "delete": "Delete", "del": "Delete",
        "insert": "Insert", "home": "Home", "end": "End", "pageup": "Prior", "page_up": "Prior",
        "pagedown": "Next", "page_down": "Next", "up": "Up", "down": "Down", "left": "Left", "right": "Right",
    ]

    /// One `+`-separated part: aliases case-insensitively, `f1`–`f12` upper-cased, a single
    /// upper-case letter lowered, anything else unchanged (`XF86AudioPlay`, `semicolon`).
    public static func normalize(part: String) -> String {
        let lower = part.lowercased()
        if let alias = aliases[lower] { return alias }
        if lower.hasPrefix("f"), let number = Int(lower.dropFirst()), (1...12).contains(number), lower.count <= 3 { return "F\(number)" }
        if part.count == 1, let c = part.unicodeScalars.first, c.isASCII, ("A"..."Z").contains(Character(c)) { return lower }
        return part
    }

    /// A combination such as `CTRL+L` → `ctrl+l`.
    public static func normalize(combination: String) -> String {
        combination.split(separator: "+", omittingEmptySubsequences: false).map { normalize(part: String($0)) }.joined(separator: "+")
    }

    /// The keysym for a normalized key name; nil when X knows no such key.
    public static func keysym(_ name: String) -> UInt32? {
        switch name {
        case "ctrl": return 0xFFE3  // Control_L
        case "alt": return 0xFFE9  // Alt_L
        case "shift": return 0xFFE1  // Shift_L
        case "super": return 0xFFEB  // Super_L
        default: break
        }
        if name.unicodeScalars.count == 1, let scalar = name.unicodeScalars.first { return keysym(for: scalar) }
        let sym = desktop_keysym(name)
        return sym == 0 ? nil : sym
    }

    /// The keysym that types `scalar` (Latin-1 directly, other characters as Unicode keysyms).
    public static func keysym(for scalar: Unicode.Scalar) -> UInt32 {
        switch scalar.value {
        case 0x0A, 0x0D: return 0xFF0D  // Return
        case 0x09: return 0xFF09  // Tab
        case 0x08: return 0xFF08  // BackSpace
        case 0x1B: return 0xFF1B  // Escape
        case 0x20...0x7E, 0xA0...0xFF: return scalar.value
        default: return 0x0100_0000 | scalar.value
        }
    }
}
