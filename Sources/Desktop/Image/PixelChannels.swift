/// Where red, green and blue sit within each 4-byte pixel of an image (the fourth byte is
/// unused): RGBX, or the X server's own order when its rows are read as they are.
struct PixelChannels: Sendable, Equatable {
    var red: Int
    var green: Int
    var blue: Int

    /// R, G, B, unused.
    static let rgbx = PixelChannels(red: 0, green: 1, blue: 2)

    /// Each position is a byte of a 4-byte pixel.
    var isValid: Bool { [red, green, blue].allSatisfy { (0..<4).contains($0) } }
}
