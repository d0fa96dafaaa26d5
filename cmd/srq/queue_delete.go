package main

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/srqueue/srq/engine"
)

// QueueDeleteJSON is what `srq queue delete --json` prints.
type QueueDeleteJSON struct {
	Action string `json:"action"` // "delete"
	Queue  string `json:"queue"`
	Keys   int    `json:"keys"` // the keys deleted
}

// queueDelete runs `srq queue delete <name>`: it deletes every key of a queue and its registry
// entry, after a confirmation, refusing while the queue's workers are live unless --force. A
// queue that is not registered is an error, unless --force: then its keys, if any are left, are
// deleted as those of one shard.
func (c *cli) queueDelete(args []string) error {
	fs := c.flags("queue delete")
	force := fs.Bool("force", false, "delete even while workers of the queue are live, or the keys of a queue that is not registered")
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
	if !*force {
		_, err := engine.QueueShards(c.ctx, c.client, c.opts.prefix, name)
		if errors.Is(err, engine.ErrQueueNotFound) {
			return fmt.Errorf("no queue %s under prefix %s: nothing was deleted; 'srq queues' lists the registered queues "+
				"(--force deletes the keys of a queue that is not registered)", strconv.Quote(name), strconv.Quote(c.opts.prefix))
		}
	}
	if err := c.confirm(fmt.Sprintf("Delete queue %s with every task, dead letter, counter, flow, result and event it holds",
		strconv.Quote(name))); err != nil {
		return err
	}
	n, err := c.in.DeleteQueue(c.ctx, name, *force)
	if err != nil {
		return c.explain(err)
	}
	if c.opts.json {
		return c.emitJSON(QueueDeleteJSON{Action: "delete", Queue: name, Keys: n})
	}
	fmt.Fprintf(c.stdout, "deleted queue %s: %d keys\n", show(name), n)
	return nil
}
