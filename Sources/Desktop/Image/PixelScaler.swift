/// Resizes and crops RGBX images for screenshots.
enum PixelScaler {
    /// `pixels` (`from`) resized to `to` by averaging each destination pixel's source area
    /// when shrinking, and by nearest pixel when growing.
    static func resize(_ pixels: [UInt8], from: DisplayGeometry, to: DisplayGeometry) -> [UInt8] {
        if from == to { return pixels }
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
                                sum.0 += Int(source[index])
                                sum.1 += Int(source[index + 1])
                                sum.2 += Int(source[index + 2])
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

    /// The rectangle `x, y, width, height` of `pixels` (already clamped to the image).
    static func crop(_ pixels: [UInt8], size: DisplayGeometry, x: Int, y: Int, width: Int, height: Int) -> [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity(width * height * 4)
        for row in y..<(y + height) {
            let start = (row * size.width + x) * 4
            out += pixels[start..<(start + width * 4)]
        }
        return out
    }
}
