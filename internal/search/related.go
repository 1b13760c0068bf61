package search

import (
	"strings"
	"sync"
)

// relatedGroups are sets of words that a user's task and a tool's text
// use for the same thing ("folder" and "directory", "shut down" and
// "stop"). A query term also finds the other words of each group it is
// in, at relatedWeight: a tool that shares the user's own word still
// ranks first. A word of several groups gets the members of each, never
// their groups' groups (no closure: "add" is in "create" and in "sum",
// and "create" must not lead to "sum").
//
// A member a_b is a phrase: the query's terms a and b, one after the
// other once stop words are dropped ("shut down", "money back"); it
// leads to its group, and no index term is a phrase. A phrase whose
// second word is a stop word ("turn on") cannot be one: such pairs are
// compounds (terms.go), one term in tools and queries alike ("turnon").
//
// The table is written for the vocabulary of tool catalogs: actions on
// records (create, list, update, delete, search), and the objects of
// common services (mail, calendars, files, repositories, payments,
// infrastructure, the web), and for the words users say for them
// (docs/context.md: the development queries of thirteen writers).
// Words are stemmed like the index's terms.
const relatedGroups = `
create make add new open start set setup register log put stick
start launch begin trigger run boot turnon kick_off
get fetch retrieve read show view see look display obtain open pull detail grab
list show enumerate browse all every inventory ls
find search lookup query locate seek where ever any discover look_up grep dig_up track_down hunt pull_up
update change edit modify set alter adjust patch tweak replace correct bump
delete remove erase destroy drop forget purge clear wipe trash discard archive unsubscribe
send post publish announce share deliver shoot fire_off
tell say notify message inform ping ask let_know msg msgs
reply answer respond get_back text_back write_back
stop halt end kill pause shut terminate cancel disable shut_down turnoff
cancel abort revoke stop unsubscribe
save store remember persist keep record write note jot memorize
remember memory recall know keep_mind
upload put push store backup
download save pull fetch export
copy duplicate clone fork
move rename transfer relocate
merge combine join concatenate
run execute exec invoke launch evaluate
schedule book plan arrange calendar organize
book reserve reservation
pay payment charge bill invoice checkout deposit
refund reimburse repay money_back
summarize summary overview transcript gist tldr
approve review accept
assign give delegate reassign owner hand_over hand_off handoff
complete finish done close resolve tick_off
install deploy setup set_up
scale resize replica
rollback revert undo rollout roll_back
watch monitor track observe alert change keep_eye whenever
draw generate paint illustrate image picture render art whip_up design make watercolor watercolour mascot logo sketch
type enter fill input form write
click press tap button
navigate go visit open browse url
reason think step problem sequential
calculate compute add sum total plus
repeat echo
file document doc
folder directory dir
email mail message inbox
meeting event appointment invite calendar
picture image photo screenshot drawing illustration pic pics jpg jpeg png gif
page website site webpage url link web
web internet online
bug issue problem defect error crash fail failure broken
ticket case request support help customer
repository repo project codebase
pull pr merge pull_request merge_request mr
branch main master trunk
commit change
note memo notebook jot jot_down recipe
task todo chore reminder remind
contact person people lead customer client address
customer client buyer
deal opportunity sale pipeline upsell won
company organization account business
money payment funds balance cash
subscription plan membership recurring monthly
invoice bill
vm server instance machine host box
container docker
pod kubernetes deployment
dns domain record dmarc spf cname
cache cdn
stock share ticker equity market trading
currency money exchange dollar euro eur usd gbp jpy cad aud chf
weather forecast rain snow temperature storm sunny wind umbrella dry wet rainy cloudy
air pollution quality smog asthma
warning alert alarm firing
flight plane airline fly airport nonstop nonstops layover delayed ontime
hotel stay lodging accommodation room
employee staff colleague worker coworker job_title guy hire
manager boss supervisor org chart reporting_up reports_to
vacation holiday leave absence time_off timeoff pto ooo out_office dayoff
visitor user traffic session pageview audience
call phone dial ring
outage down incident page went_down
metric cpu memory usage latency load
log output
table column schema
build pipeline ci job workflow
song track music tune
news headline coverage press
time clock timezone hour utc gmt pst pdt est edt cst cdt cet cest bst ist jst aest pacific eastern
text word content
address location place street coordinates geocode
restaurant place food eat spot ramen pizza sushi cafe coffee brunch bakery
direction route drive driving navigate walk walking foot
distance far long travel
elevation altitude height sea_level
spreadsheet sheet excel row cell
row line record entry
chat channel
reaction emoji thumb
tweet post twitter people_say folks_say
article encyclopedia wiki wikipedia biography
code source snippet script program
python script numpy pandas
knowledge kb documents
paper research scientific study publication arxiv doi
credit quota usage balance
price cost spend expense
diff difference change
history log past timeline catch_up commit
heat warm warmer thermostat temperature cold
light lamp
receipt scan ocr handwriting whiteboard written writing type_out read_off read_out
recording video
transcript caption subtitle
sms text
play listen puton
language translate translation english french german spanish italian portuguese dutch chinese japanese korean russian arabic polish swedish norwegian danish finnish greek turkish hindi hebrew vietnamese thai indonesian ukrainian czech romanian hungarian swahili tagalog
size big large small huge bytes
modified changed updated last
status state done progress transition workflow stage
dm direct message
channel room
thread conversation reply
user member account profile
nearby near around close local
coordinates latitude longitude lat lon
screenshot capture snapshot screen
scrape extract crawl content pull_out
browser tab window
upload attach attachment
database db sql postgres mysql pg psql
kubernetes k8s kubectl cluster namespace
helm chart
documentation docs reference manual guide library api
memory knowledge graph entity observation fact prefer prefers hate hates dislike preference allergic
unread inbox
attendee invite guest participant
free busy availability available slot
accept decline rsvp respond
lead prospect
ticket complaint
priority urgent important
sprint cycle iteration
bucket storage blob object
presign temporary expiring share
tag label category
due deadline
ban block
detect identify recognize
earnings revenue financials income profit
convert conversion
trip travel journey itinerary
product item catalog merchandise goods
order purchase bought
ship shipped fulfill deliver tracking shipment
inventory stock quantity left remaining
analytics statistics stats report ga
realtime live active currently
acknowledge ack
dashboard chart graph
mute silence snooze
release deploy ship
domain hostname subdomain
launch spin
phonebook addressbook contact
conference videoconference webinar meeting
lock unlock door
overdue past_due late unpaid outstanding
laptop computer desktop disk local filesystem
js javascript
ts typescript
living_room kitchen bedroom house home
agenda schedule calendar goingon goton plans diary
draft write_up compose unsent
cite citation cited reference
research investigate deep_dive writeup thorough comprehensive
`

// relatedWeight scales the score a related word adds, relative to the
// query's own word.
const relatedWeight = 0.5

// related maps a term to the terms of its groups, itself excluded.
var related = sync.OnceValue(func() map[string][]string {
	m := map[string][]string{}
	for _, line := range strings.Split(relatedGroups, "\n") {
		var group []string
		for _, w := range strings.Fields(line) {
			a, b, ok := strings.Cut(w, "_")
			if ok {
				group = append(group, porter(a)+"_"+porter(b))
			} else {
				group = append(group, porter(w))
			}
		}
		for _, t := range group {
			for _, r := range group {
				if r != t && !contains(m[t], r) {
					m[t] = append(m[t], r)
				}
			}
		}
	}
	return m
})

func contains(s []string, x string) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}
