package partition_test

import (
	"fmt"

	"github.com/srqueue/srq/partition"
)

func ExampleOrdered() {
	user := partition.Ordered("user-42")
	fmt.Println(user, user.IsOrdered(), user.Name())

	reports := partition.Key("reports")
	fmt.Println(reports, reports.IsOrdered(), reports.Name())

	fmt.Println(partition.Base.IsOrdered())
	fmt.Println(partition.Ordered("").Validate() != nil)
	// Output:
	// !user-42 true user-42
	// reports false reports
	// false
	// true
}

func ExampleKey_IsOrdered() {
	for _, k := range []partition.Key{partition.Base, "a:b", "!account:7", partition.Ordered("a:b")} {
		fmt.Printf("%q ordered=%v\n", k, k.IsOrdered())
	}
	// Output:
	// "" ordered=false
	// "a:b" ordered=false
	// "!account:7" ordered=true
	// "!a:b" ordered=true
}
