package ipcache

import (
	"github.com/cilium/hive/cell"
	"github.com/cilium/statedb"
)

// Cell provides the table: statedb.RWTable[*Entry] for its one writer
// and statedb.Table[*Entry] for readers. It needs a *statedb.DB.
var Cell = cell.Provide(NewTable, statedb.RWTable[*Entry].ToTable)
