import AgentHTTP

/// What the agent makes of an `/action` body, for the fuzz targets (`Fuzz/`, `make fuzz`):
/// the checked numbers of a ``DesktopAction`` and where its points land on a desktop of a
/// given size, computed as ``ActionRunner`` computes them, without a desktop. It exists
/// for the fuzz targets only.
public enum DesktopActionFuzzing {
    /// A decoded action's numbers, and its points mapped onto a native desktop.
    public struct Facts: Sendable {
        public var name: String
        public var text: String?
        public var scroll: (dx: Int, dy: Int)
        public var hold: Duration
        public var settle: Duration?
        /// The declared size for the given native size.
        public var declared: DisplayGeometry
        /// `coordinate` and `start_coordinate` in native pixels.
        public var coordinate: (x: Int, y: Int)?
        public var startCoordinate: (x: Int, y: Int)?
        /// A screenshot region's crop in native pixels, as the screenshot computes it (nil
        /// when the region reaches beyond the screen: the screenshot refuses it).
        public var crop: (x: Int, y: Int, width: Int, height: Int)?
    }

    /// Decodes and checks `json` (``DesktopAction/decode(json:)``) and maps it onto a
    /// desktop of size `native`.
    public static func facts(json: [UInt8], native: DisplayGeometry) throws(APIError) -> Facts {
        let action = try DesktopAction.decode(json: json)
        let declared = action.declared(native: native)
        func toNative(_ point: (x: Int, y: Int)) -> (x: Int, y: Int) { declared.map(x: point.x, y: point.y, to: native) }
        return Facts(
            name: action.name, text: action.request.text, scroll: action.scroll, hold: action.hold, settle: action.settle,
            declared: declared, coordinate: action.coordinate.map(toNative), startCoordinate: action.startCoordinate.map(toNative),
            crop: action.regionCrop(native: native))
    }
}
