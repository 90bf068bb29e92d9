package telemetry_test

import (
	"fmt"

	"github.com/olp-edu/borda/telemetry"
)

func ExampleTemplate() {
	fmt.Println(telemetry.Template("/api/alunos/42/notas"))
	fmt.Println(telemetry.Template("/v1/files/0b7e5e0e-58a4-4b1c-9a0e-3f1c2d3e4f5a?download=1"))
	fmt.Println(telemetry.Template("/objs/507f1f77bcf86cd799439011"))
	fmt.Println(telemetry.Template("/cafe"))
	// Output:
	// /api/alunos/{id}/notas
	// /v1/files/{id}
	// /objs/{id}
	// /cafe
}

func ExampleParseDimension() {
	for _, dim := range []string{"portal:/api/alunos/{id}", "escola:3141", "would_block:portal:/login", "status:429"} {
		kind, value, _ := telemetry.ParseDimension(dim)
		fmt.Printf("%s %s\n", kind, value)
	}
	// Output:
	// endpoint portal:/api/alunos/{id}
	// escola 3141
	// would_block portal:/login
	// status 429
}
