/// Resizes RGBX images for screenshots (a region is captured alone, so needs no crop).
///
/// Sizes come from the desktop (at most 65535 a side: X sizes are 16-bit) and from a
/// client's declared size, which is checked against ``DesktopLimits`` first; it also
/// refuses (nil) any size that does not fit, rather than trap.
enum PixelScaler {
    /// `pixels` (`from`, red, green and blue at `channels`) resized to `to` as RGBX, by
    /// averaging each destination pixel's source area when shrinking, and by nearest pixel
    /// when growing; `pixels` itself, in its own channel order, when the sizes are equal. Nil
    /// unless `to` is within ``DesktopLimits`` and `pixels` holds `from`.
    static func resize(_ pixels: [UInt8], from: DisplayGeometry, to: DisplayGeometry, channels: PixelChannels = .rgbx) -> [UInt8]? {
        guard holds(pixels, from), channels.isValid, DesktopLimits.allowsImage(width: to.width, height: to.height) else { return nil }
        if from == to { return pixels }
        let (r, g, b) = (channels.red, channels.green, channels.blue)
        var out = [UInt8](repeating: 0, count: to.width * to.height * 4)
        pixels.withUnsafeBufferPointer { source in
            out.withUnsafeMutableBufferPointer { target in
                for y in 0..<to.height {
                    let y0 = y * from.height / to.height
                    let y1 = max(y0 + 1, min(from.height, (y + 1) * from.height / to.height))
                    for x in 0..<to.width {
                        let x0 = x * from.width / to.width
                        let x1 = max(x0 + 1, min(from.width, (x + 1) * from.width / to.width))
                        var sum = (0, 0, 0)
                        for sy in y0..<y1 {
                            var index = (sy * from.width + x0) * 4
                            for _ in x0..<x1 {
                                sum.0 += Int(source[index + r])
                                sum.1 += Int(source[index + g])
                                sum.2 += Int(source[index + b])
                                index += 4
                            }
                        }
                        let count = (y1 - y0) * (x1 - x0)
                        let at = (y * to.width + x) * 4
                        target[at] = UInt8(sum.0 / count)
                        target[at + 1] = UInt8(sum.1 / count)
                        target[at + 2] = UInt8(sum.2 / count)
                    }
                }
            }
        }
        return out
    }

    /// `pixels` holds a whole image of `size` (each side 1…65535, so the product cannot overflow).
    private static func holds(_ pixels: [UInt8], _ size: DisplayGeometry) -> Bool {
        (1...65535).contains(size.width) && (1...65535).contains(size.height) && pixels.count >= size.width * size.height * 4
    }
}
