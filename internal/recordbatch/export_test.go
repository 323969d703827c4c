package recordbatch

// Internals the package's external tests check.
var (
	XerialMagic   = xerialMagic
	FillerRecords = fillerRecords
)
