// The Scripts module: see Module/ScriptsModule.swift.
