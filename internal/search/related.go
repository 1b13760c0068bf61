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
reschedule postpone push_back move_meeting change_time rearrange
free_time free_slot open_slot time_slot timeslot availability
invitation invite invites invitations rsvp
decline turn_down say_no regrets
tentatively tentative
zoom video_call videocall webex
meeting standup huddle catchup
upcoming coming_up planned
subject subject_line
cc bcc carbon_copy
label flag flagged
message msg msgs
sms texting texted txt text_message
reacting thumbs_up emoji
ban kick_out boot_out throw_out
phone_call ring_up voice_call
carrier caller caller_id reverse_lookup
task tasks checklist action_item action_items todos
complete mark_done cross_off check_off knock_out
append add_bottom add_end
append add_row add_rows new_row insert_row
subdirectory subdirectories subfolder subfolders subdir
tree hierarchy nested recursive
permissions perms chmod access_rights
path filepath file_path pathname
glob wildcard pattern
gzip compress compression zipped tarball gz
address postcode zip_code postal_code zipcode street_address
pdf pdfs acrobat print_pdf save_pdf export_pdf
fill fill_out populate
google_drive gdrive dropbox onedrive sharepoint
spreadsheet workbook xlsx gsheet gsheets airtable
deal deals oppty opps opp
stage funnel phase lifecycle_stage
amount deal_size deal_value
close_date closing_date expected_close
crm hubspot salesforce sfdc
owner sales_rep account_manager account_owner
company firm corp corporation
helpdesk help_desk zendesk freshdesk service_desk servicedesk
requester submitter reporter
assignee support_agent support_rep csr
urgency severity sev critical
internal internal_note private_note
comment comments remark annotate
escalation escalate escalated
resolve resolved solved fixed mitigated
tracker jira linear issue_tracker bug_tracker
story epic subtask user_story
estimate estimation story_points storypoints sizing
transition wip underway ongoing
board kanban scrum_board backlog
assignee assigned
github gitlab bitbucket gh
pull_request pull_requests prs mrs merge_requests
success succeeded passing passed green_build
failed failing broken red_build
git_checkout switch_branch change_branch swap_branch
staged stage_files unstaged
working_tree uncommitted dirty local_changes
rebase rebased update_branch sync_branch base_branch
circleci jenkins github_actions travis buildkite
rerun retry rebuild re_run rekick
logs stdout stderr build_log job_log
tail tailing follow_logs stream_logs last_lines
deploy redeploy deploying go_live push_prod rollout
workload deployment daemonset statefulset replicaset
scale scale_up scale_down upscale downscale replicas
cordon drain uncordon evict node_maintenance
port_forward portforward tunnel forwarding
command shell bash cli command_line
kubeconfig kube_context kubecontext contexts
upgrade upgrading newer_version latest_version
uninstall teardown tear_down rip_out
describe inspect examine
cleanup clean_up tidy_up
instance virtual_machine vms
launch provision spin_up fire_up
terminate decommission nuke
cost_report cost_explorer aws_bill cloud_bill cloud_spend
dockerfile docker_image container_image
registry dockerhub docker_hub ecr
region aws_region datacenter data_center
ip ip_address public_ip
cloudflare cf
dns nameserver nameservers resolver
purge flush invalidate invalidation bust
mysql sqlite mariadb
query sql_query run_sql
insert ddl dml migration alter_table create_table
datadog grafana prometheus new_relic splunk
timeseries time_series trend
error_rate failure_rate exceptions
latency response_time slowness lag laggy
monitor uptime health_check healthcheck
mute suppress quiet shush
widget widgets tiles
pagerduty opsgenie
oncall responder pager rota duty
acknowledge acked claim
service services microservice microservices
raise file_bug report_bug log_bug create
enhancement feature_request improvement issue
invoicing invoiced billed billing invoice
refund refunded chargeback reverse_charge
subscribe signup sign_up enroll
payment_link pay_link checkout_link buy_link
payment_method payment_methods card credit_card debit_card
shopify storefront webshop ecommerce online_store
variant variants sku skus
inventory restock sold_out out_stock replenish stock_level
fulfill dispatch dispatched send_out
tracking_number tracking_code tracking_id
shipping_address delivery_address
sick sick_leave sick_day ill unwell poorly
time_off annual_leave parental_leave maternity_leave paternity_leave
time_off off_work days_off out_sick
department dept division
employees staff_directory employee_directory company_directory headcount
reporting_lines direct_reports reportees
job_title designation
hr hris bamboohr workday human_resources people_ops
flight flights airfare fares plane_ticket plane_tickets
origin departure departing depart
destination arrival arriving
gate boarding boarding_gate
hotel motel inn hostel bnb resort airbnb
booking confirmation confirmation_number reservation_number pnr
passenger passengers traveler travelers traveller travellers pax
place places landmark attraction poi sights
directions transit public_transport bus subway metro bike cycling
distance mileage miles kilometres kilometers km
travel travel_time eta commute journey_time drive_time
rating ratings rated stars
opening_hours open_now business_hours closing_time
humidity humid muggy
severe floods flood flooding hurricane tornado blizzard heatwave typhoon
air_quality aqi pollutant pollutants haze smoke pollen
units celsius fahrenheit degrees centigrade imperial
temperature chilly freezing frost frosty jacket coat
sky overcast fog foggy drizzle sunshine hail sleet
weather rain pour pouring raining downpour showers
forecast prediction forecasted
headlines top_stories breaking_news current_events
web_search googling bing duckduckgo search_engine
scrape scraping scraper harvest
crawl crawler crawling spider
sitemap site_map url_inventory url_list
markdown md
playwright puppeteer selenium headless browser_automation
hover mouseover mouse_over
drag dragging drag_drop
dropdown drop_down select_option combobox picklist
keyboard keystroke keypress hotkey
navigate_back go_back previous_page back_button
dialog dialogue popup pop_up modal
dark_mode light_mode color_scheme colour_scheme theme
console devtools console_log
network xhr har http_requests api_calls
wait await wait_until
resize viewport window_size
preprint preprints pubmed biorxiv medrxiv
abstract abstracts synopsis
citers bibliography co_citation related_work
author authors researcher researchers
literature literature_review lit_review
song songs tunes jams banger bop
skip skip_song next_track next_song
resume unpause
currently_playing now_playing whats_playing
playlist playlists mixtape
artist artists band singer musician
light lights bulb bulbs lighting
turn_off switch_off power_off shut_off lights_out power_down
brightness dim dimmer brighten
thermostat hvac aircon air_conditioning heating heater furnace
lock deadbolt smart_lock
devices device appliance appliances gadget gadgets smart_home iot
appliance smart_plug plug outlet
home_assistant homeassistant hass
translate localize localise localization localisation
pptx powerpoint slides slide_deck
describe alt_text image_description
relation relations relationship relationships
current_time local_time time_now
timezone time_zone tz time_difference hours_ahead hours_behind
quote quotes share_price stock_price
price_history ohlc candlestick candles
ticker nasdaq nyse ftse dow
symbol symbols ticker_symbol
income_statement balance_sheet eps quarterly_results annual_report
exchange_rate fx forex conversion_rate
tweet tweets tweeted tweeting xeet
timeline feed recent_posts
username user_name screen_name
page_views pageviews visits sessions
top_pages most_viewed popular_pages most_visited
conversions goal_completions signups
video videos youtube yt clip clips
sandbox repl jupyter playground
pip npm dependency dependencies pypi
examples example tutorial sample_code
notion notion_page
template templates boilerplate blueprint
bucket object_storage cloud_storage gcs minio
presign presigned signed_url presigned_url share_link
address_book rolodex contact_list
phone_number mobile_number cell_number cellphone
alive responsive heartbeat reachable
reconnect reconnecting reestablish
download dl downloads
note journal journaling
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
