package main

import (
	"fmt"
	"strconv"
)

// queueDelete runs `srq queue delete <name>`: it deletes every key of a queue and its registry
// entry, after a confirmation, refusing while the queue's workers are live unless --force.
func (c *cli) queueDelete(args []string) error {
	fs := c.flags("queue delete")
	force := fs.Bool("force", false, "delete even while workers of the queue are live")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("queue delete needs exactly one queue name")
	}
	name := pos[0]
	if err := c.connect(); err != nil {
		return err
	}
	if err := c.confirm(fmt.Sprintf("Delete queue %s with every task, dead letter, counter, flow, result and event it holds",
		strconv.Quote(name))); err != nil {
		return err
	}
	n, err := c.in.DeleteQueue(c.ctx, name, *force)
	if err != nil {
		return c.explain(err)
	}
	fmt.Fprintf(c.stdout, "deleted queue %s: %d keys\n", show(name), n)
	return nil
}
